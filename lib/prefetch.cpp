#include "lib/prefetch.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace roundscope {

void prefetch_pages(std::span<const std::byte> range) {
    if (range.empty()) return;
    static const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(range.data()) & ~(page - 1);
    const auto end = reinterpret_cast<std::uintptr_t>(range.data()) + range.size();
    // Advice only: failure (memory that is not a file mapping) changes nothing.
    (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

}  // namespace roundscope
