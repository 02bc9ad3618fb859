#pragma once
// The choices of the online softmax that a recipe names and a kernel executes, and the exp2 and
// log functions they select: plain enums and host-device functions, shared by the recipe
// (attention_recipe.hpp), the scalar steps (attention_steps.hpp) and the CUDA kernels.
#include <cstdint>

#include "emu/attention/math/soft_exp2.hpp"
#include "emu/numbers/f32_arith.hpp"
#if !defined(__CUDA_ARCH__)
#include "emu/mufu/h100_mufu.hpp"
#endif

namespace roundscope::emu {

enum class Exp2Kind : std::uint8_t {
    software,         // soft_exp2.hpp: the same function on CPU and GPU (bit-exact)
    hardware_approx,  // the GPU's ex2.approx.f32; on the CPU an H100's (emu/mufu/h100_mufu.hpp)
    cuda_exp2f,       // CUDA's exp2f without fast math (PyTorch's flash kernels): MUFU.EX2 behind
                      // the -126 guard, on the CPU an H100's MUFU.EX2 (the same function as
                      // ex2.approx.f32 on sm_90, which compiles to that guard)
    hardware_ftz,     // ex2.approx.ftz.f32, what exp2f compiles to under --use_fast_math
                      // (FlashAttention-3): MUFU.EX2 alone, subnormal inputs and outputs flushed;
                      // on the CPU an H100's
};

/// How a row's sum l is formed across a tile's keys.
enum class RowSum : std::uint8_t {
    sequential,  // the tile's P-bar summed in key order, then l = l alpha + sum
    quad_ffma,   // FlashAttention-2's four lanes per row: lane t holds keys j with (j mod 8) / 2 = t
                 // in order, each tile l_t = fma(l_t, alpha, its first P-bar) + the rest; at the end
                 // l = (l_0 + l_2) + (l_1 + l_3) (the butterfly with offset 2, then 1)
    lane_tile,   // FlashAttention-3's (hopper/softmax.h): the same four lanes, but each sums its keys
                 // of the tile first, r_t = P-bar_first + ... in order, then l_t = fma(l_t, alpha, r_t)
    cudnn,       // cuDNN's SDPA on sm_90 (measured on its captures): lane_tile's lanes and steps, joined
                 // at the end as l = (l_0 + l_1) + (l_2 + l_3) (the butterfly with offset 1, then 2)
    mem_eff,     // PyTorch's memory-efficient kernel (kernel_forward.h, iterative_softmax): each warp's 32
                 // keys of a tile over the same four lanes, each lane's keys summed from zero, joined
                 // (r_0 + r_1) + (r_2 + r_3); l = RN(l alpha), then each warp's sum added in key order
};

/// How exp2's argument for P-bar is formed from a score s, the scale c = scale log2(e) and the
/// row max m (log2 units, m = RN(max s c)).
enum class Exp2Arg : std::uint8_t {
    mul_sub,  // RN(RN(s c) - m): the product rounded first (PyTorch's flash, built with UNFUSE_FMA)
    fma,      // RN(s c - m) in one fused multiply-add (FlashAttention built with FMA contraction):
              // at the max key the argument is the product's rounding error, not 0, so P-bar there
              // may differ from 1 by an ulp
};

/// The argument of the rescale factor alpha when the running max moves from m_old to m_new.
enum class RescaleArg : std::uint8_t {
    scaled,  // exp2(m_old' - m_new'), the maxima in log2 units (each RN(m c))
    raw,     // exp2(RN(RN(m_old - m_new) c)), the maxima of the raw scores (FlashAttention-2)
};

namespace detail {
// MUFU.EX2 and MUFU.LG2 (ftz): the GPU's own on a GPU, an H100's on the CPU.
ROUNDSCOPE_HD inline float mufu_ex2_ftz(float x) {
#if defined(__CUDA_ARCH__)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return h100_ex2_ftz(x);
#endif
}
ROUNDSCOPE_HD inline float mufu_lg2_ftz(float x) {
#if defined(__CUDA_ARCH__)
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return h100_lg2_ftz(x);
#endif
}
}  // namespace detail

/// exp2f as a CUDA build without fast math compiles it (SASS: FSETP.GEU x, -126; @!P FMUL x, 0.5;
/// MUFU.EX2; @!P FMUL r, r, r). On the CPU, bit-exact with an H100 on all 2^32 inputs.
ROUNDSCOPE_HD inline float cuda_exp2f(float x) {
    if (!(x < -126.0f)) return detail::mufu_ex2_ftz(x);
    const float half = detail::mufu_ex2_ftz(f32_arith::mul(x, 0.5f));
    return f32_arith::mul(half, half);
}

/// lg2.approx.f32 (non-ftz) as ptxas expands it: an input below 2^-126 (zero and negatives
/// too, which then give -inf and NaN as before) is scaled by 2^24 and 24 subtracted (bit-exact
/// with an H100 on all 2^32 inputs, on the CPU).
ROUNDSCOPE_HD inline float cuda_log2f(float x) {
    if (x < 0x1p-126f) return f32_arith::add(detail::mufu_lg2_ftz(f32_arith::mul(x, 0x1p24f)), -24.0f);
    return detail::mufu_lg2_ftz(x);
}

/// rcp.approx.ftz.f32 (MUFU.RCP), what 1.0f / x compiles to under --use_fast_math: the GPU's own
/// on a GPU (the FP8 Hopper kernel's epilogue), an H100's on the CPU.
ROUNDSCOPE_HD inline float mufu_rcp_ftz(float x) {
#if defined(__CUDA_ARCH__)
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return h100_rcp_ftz(x);
#endif
}

/// __logf without fast math (SASS: a 2^24 scaling below 2^-126, MUFU.LG2, -24, FMUL by RN(ln 2)).
/// On the CPU with an H100's MUFU.LG2.
ROUNDSCOPE_HD inline float cuda_logf(float x) {
    constexpr float ln2 = 0x1.62e430p-1f;
    return f32_arith::mul(cuda_log2f(x), ln2);
}

/// exp2 as the recipe computes it: the shared software function, or the GPU's MUFU.EX2 behind
/// the guard (ex2.approx.f32 and CUDA's exp2f compile to the same SASS on sm_90; on the CPU
/// both are an H100's).
ROUNDSCOPE_HD inline float exp2_of(float x, Exp2Kind kind) {
    if (kind == Exp2Kind::software) return soft_exp2(x);
    if (kind == Exp2Kind::hardware_ftz) return detail::mufu_ex2_ftz(x);
#if defined(__CUDA_ARCH__)
    if (kind == Exp2Kind::hardware_approx) {
        float y;
        asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
        return y;
    }
#endif
    return cuda_exp2f(x);
}

}  // namespace roundscope::emu
