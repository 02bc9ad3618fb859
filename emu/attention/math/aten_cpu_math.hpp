#pragma once
// What ATen's CPU flash attention (FlashAttentionKernel.cpp, the AVX-512 build of libtorch_cpu)
// computes outside its GEMMs, operation by operation. Host only. Found against the installed
// torch (tests/peer/test_aten_cpu_torch.py):
//   fexp_u20       Vectorized<float>::fexp_u20, the fast exp of Malossi et al. ("Fast exponential
//                  computation on SIMD architectures", 2015) that ATen uses for the BF16 kernel:
//                  2^(x log2 e) from a cubic correction of the fraction written into the
//                  exponent field; exp(0) = 1 - 896 2^-24
//   vector_sum     the row sum _exp_reduce_sum_fusion_kernel forms: two accumulators of 16 lanes
//                  taking alternate vectors (an odd last one to the first), added, then reduced
//                  as vec_reduce_all does (lanes i + (i ^ 8), then ^ 4, ^ 2, ^ 1)
//   exp_u20, vector_sum_one   the float32 kernel's: Vectorized<float>::exp_u20 (a degree-5
//                  polynomial of the remainder against ln 2, times 2^(n - 1), times 2) and one
//                  accumulator of 16 lanes, reduced the same way
//   libm_expf/logf the C library's expf and logf, which ATen calls for the rescale and the LSE,
//                  and its exp(double) rounded to float for the keys past the last whole vector
//                  (glibc 2.28 and later: the same bits on every machine of one glibc; the peer
//                  test holds them to the installed torch)
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "emu/numbers/f32_arith.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu::aten_cpu {

/// Vectorized<float>::fexp_u20 (AVX-512): 0 below ln(FLT_MIN) (0xc2aeac50), +inf above
/// ln(FLT_MAX) (0x42b17218); NaN gives what its conversions give (0x80000000, -0).
inline float fexp_u20(float x) {
    namespace a = f32_arith;
    if (x < float_from_bits(0xc2aeac50u)) return 0.0f;
    if (x > float_from_bits(0x42b17218u)) return float_from_bits(0x7F800000u);
    const float src = a::mul(x, float_from_bits(0x3fb8aa3bu));  // x log2(e)
    const float fraction = a::sub(src, std::floor(src));
    float r = a::fma(fraction, -0.079204240219773236f, -0.22433836478672356f);
    r = a::fma(fraction, r, 0.30354260500649682f);
    r = a::fma(fraction, r, 0.00010703434948458272f);
    // 2^23 (src - r) + 127 2^23 in one fused step, truncated to an integer: the result's bits
    const float biased = a::fma(8388608.0f, a::sub(src, r), 1065353216.0f);
    if (!(biased > -2147483648.0f && biased < 2147483648.0f)) return float_from_bits(0x80000000u);
    return float_from_bits(static_cast<std::uint32_t>(static_cast<std::int32_t>(biased)));
}

/// vec_reduce_all's sum of one vector of 16 lanes: lanes i + (i ^ 8), then ^ 4, ^ 2, ^ 1.
inline float reduce_lanes(float (&lanes)[16]) {
    namespace a = f32_arith;
    for (const int step : {8, 4, 2, 1}) {
        float next[16];
        for (int l = 0; l < 16; ++l) next[l] = a::add(lanes[l], lanes[l ^ step]);
        for (int l = 0; l < 16; ++l) lanes[l] = next[l];
    }
    return lanes[0];
}

/// The float32 sum of p[0, 16 v) as _exp_reduce_sum_fusion_kernel forms it (see above).
inline float vector_sum(const float* p, std::size_t vectors) {
    namespace a = f32_arith;
    float acc[2][16] = {};
    for (std::size_t v = 0; v < vectors; ++v) {
        float* to = acc[v % 2];  // an odd last vector is even-numbered: the first accumulator
        for (int l = 0; l < 16; ++l) to[l] = a::add(to[l], p[v * 16 + static_cast<std::size_t>(l)]);
    }
    float lanes[16];
    for (int l = 0; l < 16; ++l) lanes[l] = a::add(acc[0][l], acc[1][l]);
    return reduce_lanes(lanes);
}

/// Vectorized<float>::exp_u20 (AVX-512), which ATen's float32 kernel takes: x clamped to
/// [ln(FLT_MIN), ln(FLT_MAX)] (0xc2aeac50, 0x42b17218; a NaN becomes the upper bound, as MINPS
/// returns its second operand), n = floor(fma(x, log2 e, 1/2)), r = fma(-n, ln 2, x), the
/// polynomial 1 + r(c1 + r(c2 + r(c3 + r(c4 + r c5)))) by fmas, times 2^(n - 1) (0 where x is
/// below the lower bound), times 2. Constants from ATen's vec512_float.h.
inline float exp_u20(float x) {
    namespace a = f32_arith;
    const float lo = float_from_bits(0xc2aeac50u), hi = float_from_bits(0x42b17218u);
    const bool below = x < lo;  // an ordered compare: false for a NaN
    float src = x < hi ? x : hi;
    src = src > lo ? src : lo;
    const float n = std::floor(a::fma(src, float_from_bits(0x3fb8aa3bu), 0.5f));  // log2(e)
    const float r = a::fma(-n, float_from_bits(0x3f317218u), src);                // ln(2)
    float poly = a::fma(r, 0.00828929059f, 0.0418978221f);
    poly = a::fma(r, poly, 0.166676521f);
    poly = a::fma(r, poly, 0.499991506f);
    poly = a::fma(r, poly, 0.999999701f);
    poly = a::fma(r, poly, 1.0f);
    const auto biased = static_cast<std::uint32_t>(static_cast<std::int32_t>(a::sub(n, 1.0f)) + 127);
    const float two_pow = below ? 0.0f : float_from_bits(biased << 23);
    return a::mul(a::mul(poly, two_pow), 2.0f);
}

/// The float32 sum of p[0, 16 v) as the float32 kernel forms it: one accumulator of 16 lanes,
/// then the lanes reduced as vector_sum's are.
inline float vector_sum_one(const float* p, std::size_t vectors) {
    namespace a = f32_arith;
    float lanes[16] = {};
    for (std::size_t v = 0; v < vectors; ++v)
        for (int l = 0; l < 16; ++l) lanes[l] = a::add(lanes[l], p[v * 16 + static_cast<std::size_t>(l)]);
    return reduce_lanes(lanes);
}

/// vec::reduce_all's float32 sum of x[0, n) (ATen's softmax, _vec_softmax_lastdim): under 16
/// values one sum in order from x[0] (vec_reduce_all over the partial vector's size); else x[j]
/// into lane j mod 16 (the tail into its own lanes only), the lanes reduced by reduce_lanes.
inline float reduce_all_sum(const float* x, std::size_t n) {
    namespace a = f32_arith;
    if (n == 0) return 0.0f;
    if (n < 16) {
        float sum = x[0];
        for (std::size_t j = 1; j < n; ++j) sum = a::add(sum, x[j]);
        return sum;
    }
    float lanes[16] = {};
    for (std::size_t j = 0; j < n; ++j) lanes[j % 16] = a::add(lanes[j % 16], x[j]);
    return reduce_lanes(lanes);
}

/// The C library's expf and logf, as ATen's std::exp and std::log on a float call them.
inline float libm_expf(float x) { return ::expf(x); }
/// exp in double rounded to float (the C library's exp): the keys past a block's last whole
/// vector, where ATen's unqualified exp on a float takes C's exp(double). glibc's expf differs
/// from it in about 1 argument in 400 (0.502 ulp against double rounding); the rescale, std::exp
/// on a float, is expf.
inline float libm_exp_rounded(float x) { return static_cast<float>(::exp(static_cast<double>(x))); }
inline float libm_logf(float x) { return ::logf(x); }

}  // namespace roundscope::emu::aten_cpu
