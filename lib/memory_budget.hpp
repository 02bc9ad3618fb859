#pragma once
// A run that cannot fit is refused before it allocates, instead of ending in std::bad_alloc
// after minutes of work.
#include <cstdint>
#include <string>

namespace roundscope {

/// Memory a new allocation can get now: MemAvailable of /proc/meminfo, else the physical
/// memory; in bytes.
std::uint64_t available_memory();

/// Error "WHAT needs about X GiB of memory; this machine has Y GiB available" when `bytes`
/// exceeds what is available.
void check_memory(double bytes, const std::string& what);

}  // namespace roundscope
