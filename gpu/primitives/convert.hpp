#pragma once
// Conversions for kernel code, one spelling for both builds. Two float32 values to a BF16 pair
// by one instruction, cvt.rn.satfinite.bf16x2.f32 (sm_80 on, PTX ISA 8.1): each to nearest even,
// Inf and values past the largest finite to +-0x7F7F, NaN to 0x7FFF (the ISA's rule), which is
// emu::bf16_saturating_rne, the emulator's saturating cast into BF16 on all 2^32 inputs
// (tests/emu/numbers/test_cast_f32_top_bits_exhaustive.cpp); the hardware's bits on all 2^32
// inputs are test_gpu_cast's. On the simulated GPU and in host code, that function. Four float32
// values to E4M3 by two cvt.rn.satfinite.e4m3x2.f32 (sm_89 on, PTX ISA 7.8): each to nearest
// even, Inf and values past 448 to +-448, NaN to 0x7F, which is emu::steps::saturating_cast into
// E4M3 (the emulator's cast of P; the H100's conversion digests over all 2^32 inputs in
// tests/data/golden/h100/probe are that cast's); on the simulated GPU, that function.
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/numbers/round.hpp"
#include "gpu/primitives/simt.hpp"

namespace roundscope::gpu {

/// lo's BF16 in bits 0-15, hi's in 16-31 (P's and O's pairs as wgmma and the stores take them).
ROUNDSCOPE_DEVICE inline std::uint32_t bf16x2_rn_satfinite(float lo, float hi) {
#if !defined(ROUNDSCOPE_SIMT_HOST) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    std::uint32_t d;
    asm("cvt.rn.satfinite.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));  // a to the upper half
    return d;
#else
    return emu::bf16_saturating_rne(lo) | emu::bf16_saturating_rne(hi) << 16;
#endif
}

/// x0's E4M3 in bits 0-7, x1's in 8-15, x2's in 16-23, x3's in 24-31 (a register of an FP8 A
/// fragment: four consecutive k, the lowest first).
ROUNDSCOPE_DEVICE inline std::uint32_t e4m3x4_rn_satfinite(float x0, float x1, float x2, float x3) {
#if !defined(ROUNDSCOPE_SIMT_HOST) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    std::uint16_t lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(x1), "f"(x0));  // a to the upper byte
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(x3), "f"(x2));
    return lo | static_cast<std::uint32_t>(hi) << 16;
#else
    constexpr emu::Format e4m3 = emu::e4m3;  // a copy: device code cannot refer to the host's object
    const auto e = [&](float x) { return emu::steps::saturating_cast(x, e4m3); };
    return e(x0) | e(x1) << 8 | e(x2) << 16 | e(x3) << 24;
#endif
}

}  // namespace roundscope::gpu
