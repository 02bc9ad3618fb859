#include "lib/memory_budget.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>

#include "lib/error.hpp"

namespace roundscope {
namespace {

// A "Key: value kB" line of a /proc file, in bytes; 0 when it has none.
std::uint64_t proc_kib_field(const char* file, const std::string& name) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string key;
        std::uint64_t kib = 0;
        if (fields >> key >> kib && key == name) return kib * 1024;
    }
    return 0;
}

// A number alone in a file (cgroup v2's memory.max and memory.current); none for "max" or none.
std::optional<std::uint64_t> file_number(const char* file) {
    std::ifstream in(file);
    std::uint64_t x = 0;
    if (in >> x) return x;
    return std::nullopt;
}

// Memory a new allocation can get now, in bytes, and what limits it: the machine's MemAvailable
// (else its physical memory), this process's address-space limit (ulimit -v) less what it maps
// already, and its cgroup's memory.max less memory.current, whichever is least.
struct Available {
    std::uint64_t bytes = 0;
    const char* what = "this machine has";
};

Available available_memory() {
    Available a;
    a.bytes = proc_kib_field("/proc/meminfo", "MemAvailable:");
    if (a.bytes == 0) {
        const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
        a.bytes = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
    }
    rlimit limit{};
    if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
        const std::uint64_t mapped = proc_kib_field("/proc/self/status", "VmSize:");
        const std::uint64_t left = limit.rlim_cur > mapped ? limit.rlim_cur - mapped : 0;
        if (a.bytes == 0 || left < a.bytes) a = {left, "the address-space limit (ulimit -v) leaves"};
    }
    const auto max = file_number("/sys/fs/cgroup/memory.max"), current = file_number("/sys/fs/cgroup/memory.current");
    if (max && current) {
        const std::uint64_t left = *max > *current ? *max - *current : 0;
        if (a.bytes == 0 || left < a.bytes) a = {left, "the cgroup's memory.max leaves"};
    }
    return a;
}

}  // namespace

void check_memory(double bytes, const std::string& what) {
    const Available available = available_memory();
    if (available.bytes == 0 && available.what == std::string_view("this machine has")) return;  // unknown
    if (bytes <= static_cast<double>(available.bytes)) return;
    constexpr double gib = 1024.0 * 1024.0 * 1024.0;
    char sizes[160];
    std::snprintf(sizes, sizeof sizes, " needs about %.3g GiB of memory; %s %.3g GiB available", bytes / gib,
                  available.what, static_cast<double>(available.bytes) / gib);
    throw Error(what + sizes);
}

}  // namespace roundscope
