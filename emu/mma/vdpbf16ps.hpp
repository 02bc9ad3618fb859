#pragma once
// The arithmetic of Intel's BF16 dot-product instructions (TDPBF16PS, VDPBF16PS; Intel SDM):
// a subnormal input reads as zero, each product is exact in float32 and added with one rounding
// (a fused multiply-add), a subnormal result is flushed to zero with its sign kept. The one home
// of that rule for the AMX GEMM, the AVX512-BF16 GEMM and the AVX512-BF16 GEMV.
#include <cmath>
#include <cstdint>

#include "emu/numbers/unpack.hpp"

namespace roundscope::emu::vdp {

/// x, or a zero of its sign where x is subnormal.
inline float ftz(float x) { return std::fabs(x) < 0x1p-126f ? std::copysign(0.0f, x) : x; }

/// A BF16 bit pattern as the instructions read it (subnormals as zero).
inline float bf16_daz(std::uint32_t bits) { return ftz(static_cast<float>(decode(bf16, bits))); }

/// acc + x y, rounded once and flushed: one product of a chain.
inline float fma_ftz(float x, float y, float acc) { return ftz(std::fma(x, y, acc)); }

/// One float32 lane of VDPBF16PS: acc + x1 y1 + x0 y0, the odd-indexed product added first (the
/// SDM's pseudo-code), each addition rounded and flushed.
inline float pair(float acc, float x0, float y0, float x1, float y1) { return fma_ftz(x0, y0, fma_ftz(x1, y1, acc)); }

}  // namespace roundscope::emu::vdp
