#pragma once
// Conversions for kernel code, one spelling for both builds. Two float32 values to a BF16 pair
// by one instruction, cvt.rn.satfinite.bf16x2.f32 (sm_80 on, PTX ISA 8.1): each to nearest even,
// Inf and values past the largest finite to +-0x7F7F, NaN to 0x7FFF (the ISA's rule), which is
// emu::bf16_saturating_rne, the emulator's saturating cast into BF16 on all 2^32 inputs
// (tests/emu/numbers/test_cast_f32_top_bits_exhaustive.cpp); the hardware's bits on all 2^32
// inputs are test_gpu_cast's. On the simulated GPU and in host code, that function.
#include <cstdint>

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

}  // namespace roundscope::gpu
