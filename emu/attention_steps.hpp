#pragma once
// The scalar steps of flash attention's softmax and its backward pass, shared by the CPU
// emulator (flash_attention.cpp) and the CUDA kernels (gpu/): one source, the same bits. All
// arithmetic is float32 with each rounding spelled out (f32_arith.hpp).
#include <cstdint>

#include "emu/f32_arith.hpp"
#include "emu/round.hpp"
#include "emu/soft_exp2.hpp"

namespace roundscope::emu::steps {

inline constexpr float log2e = 0x1.715476p+0f;  // log2(e) rounded to float32
inline constexpr float ln2 = 0x1.62e430p-1f;    // ln(2) rounded to float32

ROUNDSCOPE_HD constexpr float minus_infinity() { return -__builtin_huge_valf(); }

/// exp2 as the recipe computes it: the shared software function, or the GPU's ex2.approx
/// (on the CPU the library's exp2f: not the same function, hence not bit-exact).
ROUNDSCOPE_HD inline float exp2(float x, bool hardware_approx) {
    if (!hardware_approx) return soft_exp2(x);
#if defined(__CUDA_ARCH__)
    float y;
    asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return __builtin_exp2f(x);
#endif
}

/// The softmax scale in log2 units, as FlashAttention folds it into exp2's argument.
ROUNDSCOPE_HD inline float scale_log2(float scale) { return f32_arith::mul(scale, log2e); }

/// A row's running max as exp2's arguments use it: -inf (no key yet) counts as 0, so that
/// exp2(t - m) of a masked t is exp2(-inf) = 0 rather than NaN.
ROUNDSCOPE_HD inline float usable_max(float m) { return m == minus_infinity() ? 0.0f : m; }

/// Qiu & Yao's max adjustment (arXiv:2510.04212, their attention.py): a block max reached by
/// more than one score (within 1e-3 in natural units) is moved above every score, to beta m
/// when positive and to 0 otherwise, so that no P-bar entry is exactly 1.
ROUNDSCOPE_HD inline float adjusted_block_max(float block_max, int near_max_count, float beta) {
    if (near_max_count <= 1) return block_max;
    return block_max > 0 ? f32_arith::mul(block_max, beta) : 0.0f;
}

/// How close to the block max (in log2 units) a score counts as another maximum: 1e-3 nats.
inline constexpr float near_max_log2 = 0x1.7a31a0p-10f;  // 1e-3 * log2(e), rounded to float32

/// P-bar = exp2(t - m) for one score t (log2 units) and the row max m.
ROUNDSCOPE_HD inline float p_bar(float t, float m, bool hardware_approx) {
    return exp2(f32_arith::sub(t, usable_max(m)), hardware_approx);
}

/// The factor that carries the running sum and output from max m_old to m_new.
ROUNDSCOPE_HD inline float rescale(float m_old, float m_new, bool hardware_approx) {
    if (m_old == minus_infinity()) return 0.0f;  // nothing accumulated yet
    return exp2(f32_arith::sub(m_old, usable_max(m_new)), hardware_approx);
}

/// P-bar times the static scale S, rounded to the P format (saturating, as cvt.rn.satfinite).
ROUNDSCOPE_HD inline std::uint32_t cast_p(float p, float p_scale, const Format& f) {
    CastOptions o;
    o.saturate = true;
    return static_cast<std::uint32_t>(cast_from_f32(f32_arith::mul(p, p_scale), f, o));
}

/// 1 / (l S): what the accumulated output is multiplied by; 1 for an empty row (l = 0).
ROUNDSCOPE_HD inline float output_factor(float l, float p_scale) {
    if (l == 0.0f) return 1.0f;
    return f32_arith::div(1.0f, f32_arith::mul(l, p_scale));
}

/// m + log2 l, the LSE in log2 units; -inf for an empty row.
ROUNDSCOPE_HD inline float lse_log2(float m, float l) {
    if (l == 0.0f) return minus_infinity();
    return f32_arith::add(usable_max(m), soft_log2(l));
}

/// The backward pass's P from the stored LSE: exp2(t - LSE log2 e); 0 in an empty row.
ROUNDSCOPE_HD inline float p_from_lse(float t, float lse2, bool hardware_approx) {
    if (lse2 == minus_infinity()) return 0.0f;
    return exp2(f32_arith::sub(t, lse2), hardware_approx);
}

/// dS = P (dP - delta).
ROUNDSCOPE_HD inline float d_score(float p, float dp, float delta) {
    return f32_arith::mul(p, f32_arith::sub(dp, delta));
}

}  // namespace roundscope::emu::steps
