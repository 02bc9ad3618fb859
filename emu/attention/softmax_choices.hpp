#pragma once
// The choices of the online softmax that a recipe names and a kernel executes, and the exp2 and
// log functions they select: plain enums and host-device functions, shared by the recipe
// (attention_recipe.hpp), the scalar steps (attention_steps.hpp) and the CUDA kernels.
#include <cstdint>

#include "emu/attention/soft_exp2.hpp"
#include "emu/numbers/f32_arith.hpp"

namespace roundscope::emu {

enum class Exp2Kind : std::uint8_t {
    software,         // soft_exp2.hpp: the same function on CPU and GPU (bit-exact)
    hardware_approx,  // the GPU's ex2.approx; the emulator uses std::exp2 (not bit-exact)
    exp2f_proxy,      // CUDA's exp2f without fast math (PyTorch's flash kernels): ex2.approx behind
                      // the -126 guard, ex2.approx stood in for by 2^x rounded once from double
                      // (a labelled proxy until a capture of the MUFU exists, docs/gpu.md)
};

/// How a row's sum l is formed across a tile's keys.
enum class RowSum : std::uint8_t {
    sequential,  // the tile's P-bar summed in key order, then l = l alpha + sum
    quad_ffma,   // FlashAttention-2's four lanes per row: lane t holds keys j with (j mod 8) / 2 = t
                 // in order, each tile l_t = fma(l_t, alpha, its first P-bar) + the rest; at the end
                 // l = (l_0 + l_2) + (l_1 + l_3) (the butterfly with offset 2, then 1)
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
// 2^x rounded once from double, subnormal results flushed: the stand-in for MUFU.EX2 (ftz).
ROUNDSCOPE_HD inline float mufu_ex2_proxy(float x) {
    const float y = static_cast<float>(exp2(static_cast<double>(x)));
    return y < 0x1p-126f ? 0.0f : y;
}
// log2 x rounded once from double, subnormal inputs flushed: the stand-in for MUFU.LG2 (ftz).
ROUNDSCOPE_HD inline float mufu_lg2_proxy(float x) {
    if (x < 0x1p-126f && x >= 0.0f) return -__builtin_huge_valf();
    return static_cast<float>(log2(static_cast<double>(x)));
}
}  // namespace detail

/// exp2f as a CUDA build without fast math compiles it (SASS: FSETP.GEU x, -126; @!P FMUL x, 0.5;
/// MUFU.EX2; @!P FMUL r, r, r), with MUFU.EX2 stood in for by the proxy.
ROUNDSCOPE_HD inline float exp2f_proxy(float x) {
    if (!(x < -126.0f)) return detail::mufu_ex2_proxy(x);
    const float half = detail::mufu_ex2_proxy(f32_arith::mul(x, 0.5f));
    return f32_arith::mul(half, half);
}

/// __logf without fast math (SASS: a 2^24 scaling below 2^-126, MUFU.LG2, -24, FMUL by RN(ln 2)),
/// with MUFU.LG2 stood in for by the proxy.
ROUNDSCOPE_HD inline float logf_proxy(float x) {
    constexpr float ln2 = 0x1.62e430p-1f;
    if (x < 0x1p-126f && x > 0.0f)
        return f32_arith::mul(f32_arith::add(detail::mufu_lg2_proxy(f32_arith::mul(x, 0x1p24f)), -24.0f), ln2);
    return f32_arith::mul(detail::mufu_lg2_proxy(x), ln2);
}

/// exp2 as the recipe computes it: the shared software function, the GPU's ex2.approx (on the CPU
/// the library's exp2f: not the same function, hence not bit-exact), or the exp2f proxy.
ROUNDSCOPE_HD inline float exp2_of(float x, Exp2Kind kind) {
    if (kind == Exp2Kind::software) return soft_exp2(x);
    if (kind == Exp2Kind::exp2f_proxy) return exp2f_proxy(x);
#if defined(__CUDA_ARCH__)
    float y;
    asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return __builtin_exp2f(x);
#endif
}

}  // namespace roundscope::emu
