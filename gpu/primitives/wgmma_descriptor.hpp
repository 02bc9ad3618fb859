#pragma once
// wgmma's 64-bit shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): bits
// 0-13 the start address >> 4, 16-29 the leading dimension byte offset (LBO) >> 4, 32-45 the
// stride dimension byte offset (SBO) >> 4, 49-51 the base offset, 62-63 the swizzle (0 none,
// 1 128-byte, 2 64-byte, 3 32-byte); and where a K-major operand's element lies under it, the
// one home of that rule for the MMA probes and the simulated wgmma. K-major: each of the
// operand's rows (M for A, N for B) holds its K elements contiguously. Without swizzling, the
// rows come as core matrices of 8 rows x 16 bytes (128 contiguous bytes), LBO apart along K and
// SBO apart along the rows (the layout the H100 probes confirmed); with a swizzle of a span of
// 32, 64 or 128 bytes, each row is one span (an instruction's K lies within it), eight rows in
// a row, 8-row groups SBO apart, and the address's 16-byte chunk is swizzled as a TMA copy with
// that swizzle writes it (gpu/primitives/tma_swizzle.hpp), so a tile a TMA load lands is read as loaded.
// MN-major (transposed: the instruction's imm-trans-a/b set): each k holds the operand's M or N
// elements contiguously. Without swizzling, core matrices of 8 k x 16 bytes of MN, SBO apart
// along MN and LBO apart along K; with a swizzle, each k is one span of MN elements, eight k in a
// row, 8-k groups SBO apart and spans of MN LBO apart (the PTX ISA's canonical layouts, as
// CUTLASS's GMMA::Layout_MN_* atoms build them). So a row-major [K][MN] tile that a TMA load
// lands in span-wide boxes (V as P V reads it) is an MN-major operand.
#include <cstdint>

#include "gpu/primitives/tma_swizzle.hpp"
#include "lib/host_device.hpp"

namespace roundscope::gpu {

/// How an operand's elements lie along K: contiguously (K-major) or along M / N (MN-major).
enum class Major : std::uint8_t { k, mn };

struct WgmmaOperand {
    std::uint32_t start = 0;  // shared-memory byte address, a multiple of 16
    std::uint32_t lbo = 0, sbo = 0;
    std::uint32_t base_offset = 0;  // 0 for tiles aligned to their swizzle's period
    Swizzle swizzle = Swizzle::none;
};

namespace detail {
// The descriptor's swizzle field for each Swizzle (none, 32, 64, 128 bytes) and back.
ROUNDSCOPE_HD constexpr std::uint64_t swizzle_field(Swizzle s) {
    return s == Swizzle::none ? 0u : s == Swizzle::b128 ? 1u : s == Swizzle::b64 ? 2u : 3u;
}
ROUNDSCOPE_HD constexpr Swizzle swizzle_of_field(std::uint64_t f) {
    return f == 0 ? Swizzle::none : f == 1 ? Swizzle::b128 : f == 2 ? Swizzle::b64 : Swizzle::b32;
}
}  // namespace detail

ROUNDSCOPE_HD constexpr std::uint64_t encode_descriptor(const WgmmaOperand& d) {
    return (std::uint64_t{d.start >> 4} & 0x3FFF) | (std::uint64_t{d.lbo >> 4} & 0x3FFF) << 16 |
           (std::uint64_t{d.sbo >> 4} & 0x3FFF) << 32 | (std::uint64_t{d.base_offset} & 7) << 49 |
           detail::swizzle_field(d.swizzle) << 62;
}

ROUNDSCOPE_HD constexpr WgmmaOperand decode_descriptor(std::uint64_t x) {
    WgmmaOperand d;
    d.start = static_cast<std::uint32_t>(x & 0x3FFF) << 4;
    d.lbo = static_cast<std::uint32_t>(x >> 16 & 0x3FFF) << 4;
    d.sbo = static_cast<std::uint32_t>(x >> 32 & 0x3FFF) << 4;
    d.base_offset = static_cast<std::uint32_t>(x >> 49 & 7);
    d.swizzle = detail::swizzle_of_field(x >> 62 & 3);
    return d;
}

/// The shared-memory byte address of element (row, k) of a K-major operand described by `d`
/// whose elements are `element_bytes` wide.
ROUNDSCOPE_HD constexpr std::uint32_t k_major_address(const WgmmaOperand& d, std::uint32_t row, std::uint32_t k,
                                                      std::uint32_t element_bytes) {
    if (d.swizzle == Swizzle::none) {
        const std::uint32_t per_chunk = 16 / element_bytes;
        return d.start + row / 8 * d.sbo + k / per_chunk * d.lbo + row % 8 * 16 + k % per_chunk * element_bytes;
    }
    return swizzled(d.start + row / 8 * d.sbo + row % 8 * swizzle_span(d.swizzle) + k * element_bytes, d.swizzle);
}

/// The shared-memory byte address of element (mn, k) of an MN-major operand described by `d`.
ROUNDSCOPE_HD constexpr std::uint32_t mn_major_address(const WgmmaOperand& d, std::uint32_t mn, std::uint32_t k,
                                                       std::uint32_t element_bytes) {
    if (d.swizzle == Swizzle::none) {
        const std::uint32_t per_chunk = 16 / element_bytes;
        return d.start + mn / per_chunk * d.sbo + k / 8 * d.lbo + k % 8 * 16 + mn % per_chunk * element_bytes;
    }
    const std::uint32_t span = swizzle_span(d.swizzle), per_span = span / element_bytes;
    return swizzled(d.start + mn / per_span * d.lbo + k / 8 * d.sbo + k % 8 * span + mn % per_span * element_bytes,
                    d.swizzle);
}

/// Element (mn, k) of an operand of either major-ness: mn its row (M for A, N for B).
ROUNDSCOPE_HD constexpr std::uint32_t operand_address(const WgmmaOperand& d, Major major, std::uint32_t mn,
                                                      std::uint32_t k, std::uint32_t element_bytes) {
    return major == Major::k ? k_major_address(d, mn, k, element_bytes) : mn_major_address(d, mn, k, element_bytes);
}

}  // namespace roundscope::gpu
