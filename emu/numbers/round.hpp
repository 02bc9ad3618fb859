#pragma once
// round_to_format: the one rounding routine of roundscope. Every cast — scalar, batch, CPU or
// GPU, from float32, float64 or any other format — ends here, but for nearest-even from float32
// into float32's top bits (bf16), which rounds on the bits (cast_from_f32) and is proved equal.
//
// The value is m * 2^e exactly (unpack.hpp). Its quantum in the target is 2^Q with
// Q = max(E, emin) - man_bits, E = floor(log2 |x|): the spacing of the target's numbers near x,
// subnormals included. Rounding keeps r = floor(|x| / 2^Q) and decides from the discarded
// fraction whether to add one. Overflow is judged on the rounded value with an unbounded
// exponent, as IEEE 754-2019 section 7.4 does; tininess for flush-to-zero after rounding.
#include <cstdint>

#include "emu/numbers/cast_options.hpp"
#include "emu/numbers/format.hpp"
#include "emu/numbers/stochastic.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu {
namespace detail {

/// Is r * 2^q larger than m * 2^qm? (both m, r < 2^63, m != 0)
ROUNDSCOPE_HD constexpr bool scaled_greater(std::uint64_t r, int q, ScaledInt max) {
    if (r == 0) return false;
    const int er = q + bit_width(r), em = max.q + bit_width(max.m);
    if (er != em) return er > em;
    return q >= max.q ? (r << (q - max.q)) > max.m : r > (max.m << (max.q - q));
}

ROUNDSCOPE_HD constexpr std::uint64_t signed_zero(const Format& f, bool negative) {
    if (f.encoding == Encoding::e8m0) return 0xFF;  // no zero: NaN
    return negative && has_negative_zero(f) ? sign_mask(f) : 0;
}

ROUNDSCOPE_HD constexpr std::uint64_t max_finite(const Format& f, bool negative) {
    if (f.encoding == Encoding::int8 && negative) return (~max_finite_bits(f) + 1) & 0xFF;  // two's complement
    return max_finite_bits(f) | (negative ? sign_mask(f) : 0);
}

/// What overflow gives when nothing saturates: Inf, else NaN, else (FP6/FP4/int8) the max.
ROUNDSCOPE_HD constexpr std::uint64_t overflow_value(const Format& f, bool negative) {
    if (has_inf(f)) return (exponent_field_max(f) << f.man_bits) | (negative ? sign_mask(f) : 0);
    if (f.encoding == Encoding::fn) return magnitude_mask(f) | (negative ? sign_mask(f) : 0);
    if (has_nan(f)) return canonical_nan_bits(f);
    return max_finite(f, negative);
}

/// Does the mode round this value's magnitude down (so overflow stops at the max finite)?
ROUNDSCOPE_HD constexpr bool rounds_magnitude_down(RoundingMode m, bool negative) {
    return m == RoundingMode::toward_zero || m == RoundingMode::to_odd ||
           (m == RoundingMode::toward_positive && negative) || (m == RoundingMode::toward_negative && !negative);
}

/// The fraction of a NaN under `payload`: x's payload (unpack keeps it, m * 2^e in [0, 1)) cut
/// to f's fraction, for `truncated`.
ROUNDSCOPE_HD constexpr std::uint64_t nan_fraction(const Format& f, const Unpacked& x, NanPayload payload) {
    const std::uint64_t quiet = std::uint64_t{1} << (f.man_bits - 1);
    if (payload == NanPayload::all_ones) return fraction_mask(f);
    if (payload == NanPayload::quiet) return quiet;
    const int shift = -x.e - f.man_bits;  // the source's fraction bits beyond the target's
    const std::uint64_t top = shift >= 0 ? (shift >= 64 ? 0 : x.m >> shift) : x.m << -shift;
    return (top & fraction_mask(f)) | quiet;
}

ROUNDSCOPE_HD constexpr std::uint64_t nan_value(const Format& f, const Unpacked& x, const CastOptions& o) {
    const bool negative = o.nan_sign == NanSign::negative || (o.nan_sign == NanSign::keep && x.negative);
    switch (f.encoding) {
        case Encoding::ieee:
            return (exponent_field_max(f) << f.man_bits) | nan_fraction(f, x, o.nan_payload) |
                   (negative ? sign_mask(f) : 0);
        case Encoding::fn:
            return magnitude_mask(f) | (negative ? sign_mask(f) : 0);
        case Encoding::fnuz:
        case Encoding::e8m0:
            return canonical_nan_bits(f);
        case Encoding::finite:
            switch (o.nan_to_finite) {
                case NanToFinite::max_positive:
                    return max_finite_bits(f);
                case NanToFinite::zero:
                    return signed_zero(f, negative);
                case NanToFinite::negated_zero:
                    return signed_zero(f, !x.negative);
            }
            return 0;
        case Encoding::int8:
            return 0;
    }
    return 0;
}

/// Bits of the finite nonzero value r * 2^q, which the format represents exactly.
ROUNDSCOPE_HD constexpr std::uint64_t encode_finite(const Format& f, bool negative, std::uint64_t r, int q) {
    if (f.encoding == Encoding::int8) {
        const std::int64_t v = negative ? -static_cast<std::int64_t>(r) : static_cast<std::int64_t>(r);
        return static_cast<std::uint64_t>(v) & 0xFF;
    }
    const int exponent = q + bit_width(r) - 1;
    if (f.encoding == Encoding::e8m0) return static_cast<std::uint64_t>(exponent + f.bias);
    const std::uint64_t sign = negative ? sign_mask(f) : 0;
    if (exponent < emin(f)) return sign | r;  // subnormal: q == emin - man_bits
    const int shift = f.man_bits - (exponent - q);
    const std::uint64_t fraction = (shift >= 0 ? r << shift : r >> -shift) & fraction_mask(f);
    return sign | (static_cast<std::uint64_t>(exponent + f.bias) << f.man_bits) | fraction;
}

}  // namespace detail

/// Rounds the exact value x into format `to`. `index` selects the element's random stream
/// (stochastic modes only). Returns the bit pattern.
ROUNDSCOPE_HD constexpr std::uint64_t round_to_format(const Format& to, const Unpacked& x, const CastOptions& o,
                                                      std::uint64_t index = 0) {
    using namespace detail;
    if (x.cls == ValueClass::nan) return nan_value(to, x, o);
    const bool magnitude = !to.is_signed && o.unsigned_magnitude;  // |x|, and zero as the smallest
    const bool negative = x.negative && !magnitude;
    if (x.cls == ValueClass::zero || (x.subnormal && o.flush_input))
        return magnitude && to.encoding == Encoding::e8m0 ? 0 : signed_zero(to, negative);
    // Unsigned formats hold no negative number: NaN, or 0 when saturating to the range.
    if (!to.is_signed && negative) return o.saturate && to.encoding != Encoding::e8m0 ? 0 : canonical_nan_bits(to);
    if (x.cls == ValueClass::inf) return o.saturate ? max_finite(to, negative) : overflow_value(to, negative);

    const int exponent = x.e + bit_width(x.m) - 1;
    const int q = (exponent > emin(to) ? exponent : emin(to)) - to.man_bits;
    const int s = q - x.e;
    std::uint64_t r = s <= 0 ? x.m << -s : shift_right(x.m, s);
    if (s > 0) {
        const std::uint64_t rem = low_bits(x.m, s);
        // Compare rem with half an ulp, 2^(s-1); for s > 64, rem < 2^53 is below it.
        const int half_cmp = s > 64 ? -1
                                    : (rem < (std::uint64_t{1} << (s - 1))    ? -1
                                       : rem == (std::uint64_t{1} << (s - 1)) ? 0
                                                                              : 1);
        const bool inexact = rem != 0;
        bool up = false;
        switch (o.mode) {
            case RoundingMode::nearest_even:
                up = half_cmp > 0 || (half_cmp == 0 && (r & 1));
                break;
            case RoundingMode::nearest_away:
                up = half_cmp >= 0;
                break;
            case RoundingMode::toward_zero:
                break;
            case RoundingMode::toward_positive:
                up = inexact && !negative;
                break;
            case RoundingMode::toward_negative:
                up = inexact && negative;
                break;
            case RoundingMode::to_odd:
                r |= inexact ? 1 : 0;
                break;
            case RoundingMode::stochastic_exact:
                up = inexact && stochastic_exact_rounds_up(rem, s, RandomStream{o.seed, index});
                break;
            case RoundingMode::stochastic_bits:
                up = inexact && stochastic_bits_rounds_up(rem, s, o.sr_bits, RandomStream{o.seed, index});
                break;
        }
        r += up ? 1 : 0;
    }
    if (r == 0) return to.encoding == Encoding::e8m0 ? 0 : signed_zero(to, negative);  // e8m0: min 2^-127
    if (scaled_greater(r, q, max_finite_scaled(to)))
        return o.saturate || rounds_magnitude_down(o.mode, negative) ? max_finite(to, negative)
                                                                     : overflow_value(to, negative);
    if (o.flush_output && q + bit_width(r) - 1 < emin(to) && to.encoding != Encoding::int8)
        return signed_zero(to, negative);
    return encode_finite(to, negative, r, q);
}

/// Casts the bit pattern `bits` of format `from` into format `to` (one rounding).
ROUNDSCOPE_HD constexpr std::uint64_t convert(const Format& from, std::uint64_t bits, const Format& to,
                                              const CastOptions& o, std::uint64_t index = 0) {
    return round_to_format(to, unpack(from, bits), o, index);
}

/// Whether f is float32's top bits (bf16): float32's exponent field and bias, fewer fraction
/// bits. Nearest-even from float32 into it can round on the float32 bits alone.
ROUNDSCOPE_HD constexpr bool shares_f32_exponent(const Format& f) {
    return f.encoding == Encoding::ieee && f.exp_bits == 8 && f.bias == 127 && f.man_bits < 23;
}

namespace detail {

/// Nearest-even of finite float32 bits into a format that shares float32's exponent: add half
/// an ulp less one and the kept last bit, drop the low bits. A carry lands in the exponent, and
/// overflow lands on Inf's pattern. (The batch cast's vector kernel states this rule on lanes.)
ROUNDSCOPE_HD constexpr std::uint32_t rne_on_f32_bits(std::uint32_t bits, int man_bits) {
    const int drop = 23 - man_bits;
    return (bits + ((std::uint32_t{1} << (drop - 1)) - 1) + ((bits >> drop) & 1)) >> drop;
}

}  // namespace detail

// The source descriptors are copied into constexpr locals: device code may not refer to the
// host's namespace-scope objects. Nearest-even into float32's top bits, the emulator's most
// frequent cast, takes the bit rule above; it equals round_to_format on all 2^32 inputs
// (tests/emu/numbers/test_cast_f32_top_bits_exhaustive.cpp).
ROUNDSCOPE_HD constexpr std::uint64_t cast_from_f32(float x, const Format& to, const CastOptions& o,
                                                    std::uint64_t index = 0) {
    constexpr Format source = f32;
    const std::uint32_t bits = bits_of(x);
    if (shares_f32_exponent(to) && o.mode == RoundingMode::nearest_even && !o.flush_input && !o.flush_output &&
        (bits & 0x7F800000u) != 0x7F800000u) {
        const std::uint32_t r = detail::rne_on_f32_bits(bits, to.man_bits);
        const bool overflow = ((r >> to.man_bits) & 0xFF) == 0xFF;
        return overflow && o.saturate ? detail::max_finite(to, (bits >> 31) != 0) : r;
    }
    return convert(source, bits, to, o, index);
}
/// cast_from_f32(x, bf16, saturating nearest-even) on the bits alone, for every input: overflow
/// and Inf to the max finite value, NaN to round_to_format's quiet NaN 0x7FFF. For kernels that
/// cast in their inner loop, where the general path's code would be inlined at every cast;
/// equal to it on all 2^32 inputs (test_cast_f32_top_bits_exhaustive.cpp).
ROUNDSCOPE_HD constexpr std::uint32_t bf16_saturating_rne(float x) {
    const std::uint32_t bits = bits_of(x);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFFu;
    const std::uint32_t r = detail::rne_on_f32_bits(bits, 7);
    return (r & 0x7F80u) == 0x7F80u ? (r & 0x8000u) | 0x7F7Fu : r;
}

ROUNDSCOPE_HD constexpr std::uint64_t cast_from_f64(double x, const Format& to, const CastOptions& o,
                                                    std::uint64_t index = 0) {
    constexpr Format source = f64;
    return convert(source, bits_of(x), to, o, index);
}

namespace detail {

/// Whether rounded_value may take the rule below: an IEEE format with Inf and at most 24
/// significant bits, and x of magnitude in [2^-1000, 2^900) (no zero, subnormal, Inf or NaN; C
/// below stays finite).
ROUNDSCOPE_HD inline bool spacing_rule_applies(double x, const Format& f) {
    const int biased = static_cast<int>((bits_of(x) >> 52) & 0x7FF);
    return f.encoding == Encoding::ieee && f.man_bits <= 23 && biased >= 1023 - 1000 && biased < 1023 + 900;
}

/// Nearest-even of x onto the target's spacing 2^Q (Q as above) in double's own arithmetic:
/// C = 3 * 2^(Q + 51) is an even multiple of 2^Q and x + C lies in [2^(Q + 52), 2^(Q + 53)),
/// where doubles are spaced 2^Q, so x + C rounds x to a multiple of 2^Q, ties to the even one,
/// and subtracting C is exact (|x| < 2^(Q + 24)). A zero result keeps x's sign; a result
/// beyond the largest finite number is Inf, judged with an unbounded exponent as above.
ROUNDSCOPE_HD inline double spacing_rounded_value(double x, const Format& f) {
    const int e = static_cast<int>((bits_of(x) >> 52) & 0x7FF) - 1023;
    const int q = (e > emin(f) ? e : emin(f)) - f.man_bits;
    const double c = 3 * double_from_bits(static_cast<std::uint64_t>(q + 51 + 1023) << 52);
    const double r = (x + c) - c;
    if (r == 0) return x < 0 ? -0.0 : 0.0;
    // below 2^emax (IEEE: the top exponent field is Inf's), r is at most 2^emax: finite
    const int emax = static_cast<int>(exponent_field_max(f)) - 1 - f.bias;
    if (e < emax) return r;
    const double largest = decode(f, max_finite_bits(f));
    const double inf = double_from_bits(0x7FF0000000000000);
    if (r > largest || r < -largest) return x < 0 ? -inf : inf;
    return r;
}

}  // namespace detail

/// x rounded to f (nearest even, overflow to Inf) as a value: what storing x in f keeps. With
/// x the exact result of an operation on values of f (f32 or narrower), this is f's own
/// correctly rounded operation (double rounding is innocuous: 53 >= 2 * 24 + 2). For float32
/// and narrower IEEE formats, the spacing rule above (tests/emu/numbers/test_rounded_value.cpp
/// holds it to the cast on every value of f16, bf16 and e5m2, the midpoints and their
/// neighbours, and random doubles).
ROUNDSCOPE_HD inline double rounded_value(double x, const Format& f) {
    if (detail::spacing_rule_applies(x, f)) return detail::spacing_rounded_value(x, f);
    return decode(f, cast_from_f64(x, f, CastOptions{}));
}

}  // namespace roundscope::emu
