#pragma once
// exp2 and log2 in float32 from additions, multiplications and fused multiply-adds only: the
// same function on the CPU and in a CUDA kernel (f32_arith.hpp), so that an emulated softmax
// and the kernel's give the same bits. Not correctly rounded (a few ulps; the tests measure
// it against MPFR); what matters is that it is one deterministic function everywhere. The
// GPU's ex2.approx is a different function and is only a labelled, non-bit-exact option.
#include <cstdint>

#include "emu/numbers/f32_arith.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu {

namespace detail {
// 2^n for n in [-126, 127], exactly.
ROUNDSCOPE_HD constexpr float power_of_two(int n) { return float_from_bits(static_cast<std::uint32_t>(n + 127) << 23); }

// Adding it to |x| < 2^22 rounds x to an integer n and leaves n in the sum's low bits: the sum
// lies in [2^23, 2^24), where the spacing is 1, so bits(x + 1.5 2^23) = bits(1.5 2^23) + n.
inline constexpr float round_shift = 0x1.8p23f;

// 2^f for |f| <= 1/2: the degree-7 Taylor polynomial of e^(f ln 2) (remainder below 2^-27) by
// Horner's rule in fmas.
ROUNDSCOPE_HD inline float exp2_polynomial(float f) {
    namespace a = f32_arith;
    float p = 0x1.ffcbfcp-17f;  // ln2^k / k!, k = 7 .. 0, rounded to float32
    p = a::fma(p, f, 0x1.430912p-13f);
    p = a::fma(p, f, 0x1.5d87fep-10f);
    p = a::fma(p, f, 0x1.3b2ab6p-7f);
    p = a::fma(p, f, 0x1.c6b08ep-5f);
    p = a::fma(p, f, 0x1.ebfbe0p-3f);
    p = a::fma(p, f, 0x1.62e430p-1f);
    return a::fma(p, f, 1.0f);
}

// p 2^e for p in [2^-1/2, 2^1/2] and e in [-151, 128]: exact, or with one rounding where the
// result is subnormal.
ROUNDSCOPE_HD inline float times_power_of_two(float p, int e) {
    namespace a = f32_arith;
    if (e < -126) return a::mul(a::mul(p, power_of_two(e + 64)), power_of_two(-64));
    if (e > 127) return a::mul(a::mul(p, power_of_two(e - 1)), 2.0f);
    return a::mul(p, power_of_two(e));
}
}  // namespace detail

/// 2^x. x = n + f with n = rint(x), |f| <= 1/2; 2^f by detail::exp2_polynomial; 2^n applied
/// exactly, or with one rounding where the result is subnormal. -inf gives +0, NaN gives NaN.
/// n as an integer comes from the bits of x + 1.5 2^23 (integer subtraction, no float-to-int
/// conversion, which a GPU runs at a quarter of the rate). Written without branches, as a
/// kernel's inner loop wants it: the special inputs and the three ranges of detail::
/// times_power_of_two are selected, not branched to (a factor of 1 where none is needed is
/// exact). The same bits as the branching form with the conversion on every one of the 2^32
/// inputs (tests/emu/attention/test_soft_exp2_exhaustive.cpp).
ROUNDSCOPE_HD inline float soft_exp2(float x) {
    namespace a = f32_arith;
    const bool nan = x != x, overflow = x >= 128.0f, underflow = x < -151.0f;
    const float xc = nan || overflow || underflow ? 0.0f : x;  // keeps e in range below
    const float shifted = a::add(xc, detail::round_shift);
    const float n = a::sub(shifted, detail::round_shift);
    const float f = a::sub(xc, n);  // exact
    const int e = static_cast<int>(bits_of(shifted)) - static_cast<int>(bits_of(detail::round_shift));
    // 2^e as 2^e1 2^e2, each a float: one exact product, then one that rounds if subnormal
    const int e1 = e < -126 ? e + 64 : e > 127 ? e - 1 : e;
    const float second = e < -126 ? 0x1p-64f : e > 127 ? 2.0f : 1.0f;
    const float y = a::mul(a::mul(detail::exp2_polynomial(f), detail::power_of_two(e1)), second);
    return nan ? x : overflow ? float_from_bits(0x7F800000u) : underflow ? 0.0f : y;
}

/// log2(x) for x > 0: x = 2^e m with m in [sqrt(1/2), sqrt(2)), log2 m = (2 / ln 2) atanh(t)
/// with t = (m - 1) / (m + 1), |t| < 0.172, by its series to t^11. 0 gives -inf, a negative x
/// or NaN gives NaN, +inf gives +inf.
ROUNDSCOPE_HD inline float soft_log2(float x) {
    namespace a = f32_arith;
    if (!(x > 0.0f)) return x == 0.0f ? float_from_bits(0xFF800000u) : float_from_bits(0x7FC00000u);
    if (x == float_from_bits(0x7F800000u)) return x;
    int e = 0;
    if (x < 0x1p-126f) {  // subnormal: normalize exactly
        x = a::mul(x, 0x1p32f);
        e = -32;
    }
    const std::uint32_t bits = bits_of(x);
    e += static_cast<int>((bits >> 23) & 0xFF) - 127;
    float m = float_from_bits((bits & 0x007FFFFFu) | 0x3F800000u);  // [1, 2)
    if (m > 0x1.6a09e6p0f) {                                        // above sqrt(2): halve (exact)
        m = a::mul(m, 0.5f);
        ++e;
    }
    const float t = a::div(a::sub(m, 1.0f), a::add(m, 1.0f));
    const float t2 = a::mul(t, t);
    float s = 0x1.745d18p-4f;  // 1/(2k+1), k = 5 .. 0, rounded to float32
    s = a::fma(s, t2, 0x1.c71c72p-4f);
    s = a::fma(s, t2, 0x1.24924ap-3f);
    s = a::fma(s, t2, 0x1.99999ap-3f);
    s = a::fma(s, t2, 0x1.555556p-2f);
    s = a::fma(s, t2, 1.0f);
    const float log2_m = a::mul(a::mul(s, t), 0x1.715476p+1f);  // times 2 / ln 2
    return a::add(static_cast<float>(e), log2_m);
}

}  // namespace roundscope::emu
