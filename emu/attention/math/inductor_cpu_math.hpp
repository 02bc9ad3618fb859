#pragma once
// What torch.compile's C++ code for an AVX-512 CPU computes, operation by operation: exp and log
// as ATen's Vectorized<float> calls them (SLEEF's Sleef_expf16_u10 and Sleef_logf16_u10, the
// AVX-512F build with fused multiply-adds, in libtorch_cpu), and a float32 sum as Inductor's
// vectorized reduction forms it (16 or 32 lane accumulators, then ATen's vec_reduce_all). Host only.
// Checked on all 2^32 inputs against the SLEEF functions the torch wheel ships
// (tests/peer/test_inductor_math.py).
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "emu/numbers/f32_arith.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu::inductor {

namespace detail {

/// A float as the pair hi + lo of SLEEF's double-float arithmetic.
struct Pair {
    float hi, lo;
};

inline float quiet(float x) { return float_from_bits(bits_of(x) | 0x00400000u); }

/// 2^q for q in [-126, 127]: q + 127 put into the exponent field (SLEEF's vpow2i).
inline float pow2i(std::int32_t q) { return float_from_bits(static_cast<std::uint32_t>(q + 0x7f) << 23); }

/// _mm512_cvtps_epi32: nearest even; out of range and NaN give 0x80000000.
inline std::int32_t cvtps_epi32(float x) {
    if (!(x > -2147483648.5f && x < 2147483647.5f)) return INT32_MIN;
    return static_cast<std::int32_t>(std::nearbyint(static_cast<double>(x)));
}

}  // namespace detail

/// SLEEF's expf (u10, with FMA): q = rint(x / ln 2); s = x - q ln 2 in two fused steps (ln 2
/// split in two floats); 1 + s + s^2 p(s), p of degree 5 by Horner's rule in fused steps; times
/// 2^(q >> 1), then 2^(q - (q >> 1)) (two products: a subnormal result is rounded twice); 0 below
/// -104, +inf above 100. A NaN gives a NaN.
inline float expf(float x) {
    namespace a = f32_arith;
    if (x != x) return detail::quiet(x);
    const std::int32_t q = detail::cvtps_epi32(a::mul(x, 1.442695040888963407359924681001892137f));
    const auto qf = static_cast<float>(q);
    float s = a::fma(qf, -0.693145751953125f, x);
    s = a::fma(qf, -1.428606765330187045e-06f, s);
    float u = 0.000198527617612853646278381f;
    for (const float c : {0.00139304355252534151077271f, 0.00833336077630519866943359f, 0.0416664853692054748535156f,
                          0.166666671633720397949219f, 0.5f})
        u = a::fma(u, s, c);
    u = a::add(1.0f, a::fma(a::mul(s, s), u, s));
    const std::int32_t half = q >> 1;  // arithmetic shift (vsra)
    u = a::mul(a::mul(u, detail::pow2i(half)), detail::pow2i(q - half));
    if (x < -104.0f) return 0.0f;
    if (100.0f < x) return float_from_bits(0x7F800000u);
    return u;
}

/// SLEEF's logf (u10, the AVX-512F path): e = getexp(x / 0.75) (+inf: 128), m = getmant(x) in
/// [0.75, 1.5); u = (m - 1) / (m + 1) as a double-float; log x = e ln 2 + 2u + u^3 t(u^2), t of
/// degree 2, summed as double-floats and rounded once at the end; 0 gives -inf, +inf gives +inf,
/// a negative number a NaN with its sign and fraction bits (fixupimm's QNaN(src)).
inline float logf(float x) {
    namespace a = f32_arith;
    using detail::Pair;
    if (x != x) return detail::quiet(x);
    if (x == 0.0f) return -float_from_bits(0x7F800000u);
    if (x < 0.0f) return float_from_bits(bits_of(x) | 0x7FC00000u);  // QNaN(x): the sign and fraction kept
    if (bits_of(x) == 0x7F800000u) return x;
    const float scaled = a::mul(x, 1.0f / 0.75f);
    const float e = std::isinf(scaled) ? 128.0f : static_cast<float>(std::ilogb(scaled));
    int exponent = 0;
    float m = std::frexp(x, &exponent) * 2.0f;  // the significand, in [1, 2)
    if (m >= 1.5f) m *= 0.5f;
    // s = (ln 2 as hi + lo) * e (dfmul, fused)
    Pair s{a::mul(0.69314718246459960938f, e), 0.0f};
    s.lo = a::fma(-1.904654323148236017e-09f, e, a::fma(0.69314718246459960938f, e, -s.hi));
    auto add2 = [](float p, float q) {  // dfadd2: p + q exactly
        const float sum = a::add(p, q), v = a::sub(sum, p);
        return Pair{sum, a::add(a::sub(p, a::sub(sum, v)), a::sub(q, v))};
    };
    const Pair n = add2(-1.0f, m), d = add2(1.0f, m);
    // dfdiv with fused steps
    const float t = a::div(1.0f, d.hi);
    const float q = a::mul(n.hi, t);
    const float u = a::fma(t, n.hi, -q);
    const float v = a::fma(-d.lo, t, a::fma(-d.hi, t, 1.0f));
    const Pair xr{q, a::fma(q, v, a::fma(n.lo, t, u))};
    const float x2 = a::mul(xr.hi, xr.hi);
    float poly = a::fma(0.3027294874f, x2, 0.3996108174f);
    poly = a::fma(poly, x2, 0.6666694880f);
    // s + 2 xr (dfadd, |s| >= |2 xr| assumed): the low part as ((s.hi - sum) + y.hi) + s.lo + y.lo
    const Pair y{a::mul(xr.hi, 2.0f), a::mul(xr.lo, 2.0f)};
    float hi = a::add(s.hi, y.hi);
    float lo = a::add(a::add(a::add(a::sub(s.hi, hi), y.hi), s.lo), y.lo);
    // + x2 xr.hi poly (dfadd with a float)
    const float w = a::mul(a::mul(x2, xr.hi), poly);
    const float hi2 = a::add(hi, w);
    lo = a::add(a::add(a::sub(hi, hi2), w), lo);
    return a::add(hi2, lo);
}

/// SLEEF's logf on AVX2 (Sleef_logf8_u10): the AVX-512 path's value everywhere but where it is a
/// NaN (a NaN or negative x), which AVX2 returns as the default NaN 0x7FC00000 (all 2^32 inputs
/// compared: tests/peer/test_inductor_math.py). expf is the same on both.
inline float logf_avx2(float x) {
    const float y = logf(x);
    return y != y ? float_from_bits(0x7FC00000u) : y;
}

/// logf as Inductor's code calls it with vectors of `lanes` floats (16: AVX-512, 8: AVX2).
inline float logf(float x, int lanes) { return lanes == 8 ? logf_avx2(x) : logf(x); }

/// The float32 sum of x[0..n) as Inductor's reduction loop forms it over `lanes` accumulators on a
/// CPU whose vectors hold `vector` floats (16 with AVX-512, 8 with AVX2; lanes is that, or twice
/// it where the loop loads BF16: a VectorizedN<float, 2>): x[j] added in order into lane
/// j mod lanes (from +0; a tail adds only its own lanes); two vectors folded to one (lane i plus
/// lane vector + i); the vector reduced by vec_reduce_all (lane i with i ^ vector/2, then down to
/// i ^ 1: AVX2's permute and shuffles pair the lanes the same way); the result added to a
/// scalar 0.
inline float lane_sum(const float* x, std::size_t n, int lanes = 16, int vector = 16) {
    namespace a = f32_arith;
    float lane[32] = {};
    const auto v = static_cast<std::size_t>(vector == 8 ? 8 : 16);
    const std::size_t width = lanes == static_cast<int>(2 * v) ? 2 * v : v;
    for (std::size_t j = 0; j < n; ++j) lane[j % width] = a::add(lane[j % width], x[j]);
    if (width == 2 * v)
        for (std::size_t i = 0; i < v; ++i) lane[i] = a::add(lane[i], lane[v + i]);
    for (std::size_t step = v / 2; step >= 1; step /= 2) {
        float next[16];
        for (std::size_t i = 0; i < v; ++i) next[i] = a::add(lane[i], lane[i ^ step]);
        for (std::size_t i = 0; i < v; ++i) lane[i] = next[i];
    }
    return a::add(0.0f, lane[0]);
}

}  // namespace roundscope::emu::inductor
