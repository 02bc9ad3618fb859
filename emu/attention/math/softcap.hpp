#pragma once
// Soft-capped scores, as FlashAttention-2 computes them (its apply_softcap and calculate_dtanh):
// the score product s times RN(scale / cap), through tanh, is the score the softmax sees with the
// constant RN(cap log2 e) in place of scale log2 e, so that t = tanh(s scale / cap) cap log2 e, a
// score capped at +-cap (Gemma 2's cap tanh(s / cap) in natural units). The backward multiplies
// dS by dtanh = RN(RN(1 - RN(T T)) RN(scale / cap)) and dQ, dK by cap (FlashAttention-2's
// scale_softmax under a soft cap). Host only: the GPU kernels take no soft cap.
#include <cmath>

#include "emu/numbers/f32_arith.hpp"

namespace roundscope::emu {

/// tanh of a float32, correctly rounded to float32: the double tanh (glibc: within 2 ulps of
/// double) rounded once, which is the correctly rounded float32 on every float32 input
/// (tests/emu/attention/test_softcap_tanh_exhaustive.cpp: all 2^32 against MPFR).
inline float tanh_rn(float x) { return static_cast<float>(std::tanh(static_cast<double>(x))); }

/// The constants of a soft cap `cap` at softmax scale `scale` (both float32, as kernels take them).
struct SoftcapConstants {
    float score_factor;  // RN(scale / cap): what s is multiplied by before tanh
    float cap;           // dQ's and dK's final factor
    float scale_log2;    // RN(cap log2 e), in double then rounded once (FlashAttention's host code)
};

inline SoftcapConstants softcap_constants(float scale, float cap) {
    return {f32_arith::div(scale, cap), cap, static_cast<float>(static_cast<double>(cap) * 1.4426950408889634074)};
}

/// T = tanh(RN(s score_factor)): the score the softmax then scales by scale_log2.
inline float capped_score(float s, const SoftcapConstants& c) { return tanh_rn(f32_arith::mul(s, c.score_factor)); }

/// RN(RN(1 - RN(T T)) score_factor): what the backward multiplies dS by.
inline float capped_score_derivative(float t, const SoftcapConstants& c) {
    namespace a = f32_arith;
    return a::mul(a::sub(1.0f, a::mul(t, t)), c.score_factor);
}

}  // namespace roundscope::emu
