#include "lib/memory_budget.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "lib/error.hpp"

namespace roundscope {
namespace {

// Memory a new allocation can get now: MemAvailable of /proc/meminfo, else the physical
// memory; in bytes.
std::uint64_t available_memory() {
    std::ifstream meminfo("/proc/meminfo");
    std::string line;
    while (std::getline(meminfo, line)) {
        std::istringstream fields(line);
        std::string key;
        std::uint64_t kib = 0;
        if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
    }
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

}  // namespace

void check_memory(double bytes, const std::string& what) {
    const std::uint64_t available = available_memory();
    if (available == 0 || bytes <= static_cast<double>(available)) return;
    constexpr double gib = 1024.0 * 1024.0 * 1024.0;
    char sizes[128];
    std::snprintf(sizes, sizeof sizes, " needs about %.3g GiB of memory; this machine has %.3g GiB available",
                  bytes / gib, static_cast<double>(available) / gib);
    throw Error(what + sizes);
}

}  // namespace roundscope
