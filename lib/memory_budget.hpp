#pragma once
// A run that cannot fit is refused before it allocates, instead of ending in std::bad_alloc
// after minutes of work.
#include <cstdint>
#include <string>

namespace roundscope {

/// Error "WHAT needs about X GiB of memory; this machine has Y GiB available" when `bytes`
/// exceeds what is available.
void check_memory(double bytes, const std::string& what);

}  // namespace roundscope
