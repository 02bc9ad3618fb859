#pragma once
// Asks the kernel to start reading a range of a memory-mapped file now, so that a pass over a
// cold file overlaps its disk reads with computation. Harmless on other memory.
#include <cstddef>
#include <span>

namespace roundscope {

void prefetch_pages(std::span<const std::byte> range);

}  // namespace roundscope
