#pragma once
// A run that cannot fit is refused before it allocates, instead of ending in std::bad_alloc
// after minutes of work.
#include <cstdint>
#include <string>

namespace roundscope {

/// Error "WHAT needs about X GiB of memory; this machine has Y GiB available" when `bytes`
/// exceeds what is available: the least of the machine's available memory, what the process's
/// address-space limit (ulimit -v) leaves and what its cgroup's memory.max leaves (each named).
void check_memory(double bytes, const std::string& what);

}  // namespace roundscope
