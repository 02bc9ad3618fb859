#pragma once
// The shared-memory swizzles of TMA copies and wgmma operands (CUtensorMapSwizzle; the PTX ISA's
// "shared memory matrix layout" swizzling modes): within each span of 32, 64 or 128 bytes, the
// 16-byte chunk index is XORed with the span's row (the address bits above the span) modulo
// the number of chunks in a span, i.e. address bits [4, 4 + b) ^= bits [7, 7 + b) with b = 1, 2,
// 3. A swizzled tile must start at an address aligned to the pattern's period (256, 512 or 1024
// bytes). One home for the rule: the copy engine and the kernels that read the tiles use it.
#include <cstdint>

#include "lib/host_device.hpp"

namespace roundscope::gpu {

enum class Swizzle : std::uint8_t { none = 0, b32 = 1, b64 = 2, b128 = 3 };

/// The span in bytes a swizzle permutes the chunks of (none: 0, no limit).
ROUNDSCOPE_HD constexpr std::uint32_t swizzle_span(Swizzle s) {
    return s == Swizzle::none ? 0u : 16u << static_cast<unsigned>(s);
}

/// The alignment a swizzled tile's start needs: the pattern repeats every 8 rows of the span.
ROUNDSCOPE_HD constexpr std::uint32_t swizzle_alignment(Swizzle s) {
    return s == Swizzle::none ? 16u : 8u * swizzle_span(s);
}

/// Where the byte at `offset` of an unswizzled tile lies in the swizzled one (an involution).
ROUNDSCOPE_HD constexpr std::uint32_t swizzled(std::uint32_t offset, Swizzle s) {
    const unsigned b = static_cast<unsigned>(s);
    const std::uint32_t mask = (1u << b) - 1u;
    return offset ^ (((offset >> 7) & mask) << 4);
}

}  // namespace roundscope::gpu
