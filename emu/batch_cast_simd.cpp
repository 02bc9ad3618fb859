// The SIMD float32 -> narrow-format kernel: round_to_format (round.hpp) restated on vectors of
// float32 bit patterns for the formats whose exponent range lies inside float32's (f32, f16,
// bf16, FP8, FP6, FP4). Lanes it does not serve — NaN, Inf, and exact stochastic rounding whose
// fraction needs more than 32 random bits — are finished by the scalar routine itself.
#include "emu/batch_cast_simd.hpp"

#include "emu/round.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "emu/batch_cast_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace roundscope::emu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// a >= b (Highway 1.0 has no integer Ge).
template <class V>
HWY_INLINE auto ge(V a, V b) {
    return hn::Not(hn::Lt(a, b));
}

// SameExponent: the target has float32's exponent field (bf16, f32), so every finite input is
// rounded at the same bit, 23 - man_bits, and the shifted pattern is already the encoding.
template <RoundingMode Mode, bool SameExponent, class Bits>
void cast_f32_kernel(const SimdCastJob& job, const float* HWY_RESTRICT in, const std::uint32_t* HWY_RESTRICT words,
                     Bits* HWY_RESTRICT out, std::size_t n, std::uint64_t first_index) {
    const hn::ScalableTag<float> df;
    const hn::RebindToUnsigned<decltype(df)> du;
    const hn::RebindToSigned<decltype(df)> di;
    const hn::Rebind<Bits, decltype(du)> dout;
    using VU = hn::Vec<decltype(du)>;
    const Format& to = *job.to;
    const CastOptions& o = *job.options;
    const int man = to.man_bits, e_min = emin(to);
    const auto v_one = hn::Set(du, 1u);
    const auto v_max = hn::Set(du, static_cast<std::uint32_t>(max_finite_bits(to)));
    const auto v_overflow = hn::Set(du, static_cast<std::uint32_t>(detail::overflow_value(to, false)));
    const auto v_min_normal = hn::Set(du, 1u << man);
    const bool fnuz = to.encoding == Encoding::fnuz;
    const std::size_t lanes = hn::Lanes(du);

    const auto v_sign_bit = hn::Set(du, 0x80000000u);
    const int sign_shift = 32 - to.bits;
    // The add-half trick below needs a rounding position of at least one bit (not f32 -> f32).
    const bool round_by_adding = Mode == RoundingMode::nearest_even && (!SameExponent || man < 23);

    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes) {
        const VU x = hn::BitCast(du, hn::LoadU(df, in + i));
        const VU sign = hn::And(x, v_sign_bit);
        const auto negative = hn::Ne(sign, hn::Zero(du));
        VU a = hn::AndNot(v_sign_bit, x);
        const VU field = hn::ShiftRight<23>(a);
        const auto input_subnormal = hn::Eq(field, hn::Zero(du));
        if (o.flush_input) a = hn::IfThenZeroElse(input_subnormal, a);
        auto need_scalar = ge(a, hn::Set(du, 0x7F800000u));  // Inf, NaN
        VU m, r, unit, enc_base, sc;
        hn::Vec<decltype(di)> s;
        if constexpr (SameExponent) {
            const int shift = 23 - man;
            s = hn::Set(di, shift);
            sc = hn::Set(du, static_cast<std::uint32_t>(shift));
            m = a;
            r = hn::ShiftRightSame(a, shift);
            unit = hn::Set(du, 1u << shift);
            enc_base = hn::Zero(du);
        } else {
            m = hn::IfThenElse(input_subnormal, a, hn::Or(hn::And(a, hn::Set(du, 0x7FFFFFu)), hn::Set(du, 0x800000u)));
            // |x| = m * 2^(eb - 150); quantum exponent Q = max(eb - 127, emin) - man; s = Q - (eb - 150).
            const auto eb = hn::BitCast(di, hn::Max(field, v_one));
            const auto ebase = hn::Max(hn::Sub(eb, hn::Set(di, 127)), hn::Set(di, e_min));
            s = hn::Sub(hn::Sub(ebase, eb), hn::Set(di, man - 150));
            sc = hn::BitCast(du, hn::Min(s, hn::Set(di, 31)));
            r = hn::Shr(m, sc);
            unit = hn::Shl(v_one, sc);
            // Encoding of r * 2^Q: ((max(E, emin) - emin) << man) + r, the carry of r included.
            enc_base = hn::ShiftLeftSame(hn::BitCast(du, hn::Sub(ebase, hn::Set(di, e_min))), man);
        }
        const VU rem = hn::And(m, hn::Sub(unit, v_one));
        const VU half = hn::ShiftRight<1>(unit);
        const auto inexact = hn::Ne(rem, hn::Zero(du));
        auto up = hn::Ne(v_one, v_one);
        if constexpr (Mode == RoundingMode::nearest_even) {
            if (round_by_adding) {
                // Adding half - 1 plus the kept last bit carries exactly when the discarded part
                // exceeds half, or equals it and the kept part is odd.
                r = hn::Shr(hn::Add(hn::Add(m, hn::Sub(half, v_one)), hn::And(r, v_one)), sc);
            } else {
                up = hn::Or(hn::Gt(rem, half), hn::And(hn::And(hn::Eq(rem, half), inexact),
                                                       hn::Ne(hn::And(r, v_one), hn::Zero(du))));
            }
        } else if constexpr (Mode == RoundingMode::nearest_away) {
            up = hn::And(ge(rem, half), inexact);
        } else if constexpr (Mode == RoundingMode::toward_positive) {
            up = hn::AndNot(negative, inexact);
        } else if constexpr (Mode == RoundingMode::toward_negative) {
            up = hn::And(negative, inexact);
        } else if constexpr (Mode == RoundingMode::to_odd) {
            r = hn::Or(r, hn::IfThenElseZero(inexact, v_one));
        } else if constexpr (Mode == RoundingMode::stochastic_exact) {
            // U < rem / 2^s with U = w(0) / 2^32 decides whenever s <= 32.
            const VU w = hn::LoadU(du, words + i);
            const VU t = hn::Shl(rem, hn::BitCast(du, hn::Max(hn::Sub(hn::Set(di, 32), hn::Min(s, hn::Set(di, 32))), hn::Zero(di))));
            const VU t_clamped = hn::IfThenElse(hn::RebindMask(du, hn::Eq(s, hn::Zero(di))), hn::Zero(du), t);
            up = hn::And(hn::Lt(w, t_clamped), inexact);
            need_scalar = hn::Or(need_scalar, hn::And(hn::RebindMask(du, hn::Gt(s, hn::Set(di, 32))), inexact));
        } else if constexpr (Mode == RoundingMode::stochastic_bits) {
            const int nbits = o.sr_bits;
            const VU w = hn::LoadU(du, words + i);
            const auto shift_down = hn::Sub(s, hn::Set(di, nbits));
            const VU leading = hn::IfThenElse(
                hn::RebindMask(du, ge(shift_down, hn::Zero(di))),
                hn::Shr(rem, hn::BitCast(du, hn::Min(shift_down, hn::Set(di, 31)))),
                hn::Shl(rem, hn::BitCast(du, hn::Min(hn::Neg(shift_down), hn::Set(di, 31)))));
            const VU random = hn::ShiftRightSame(w, 32 - nbits);
            up = hn::And(ge(hn::Add(leading, random), hn::Set(du, 1u << nbits)), inexact);
        }
        r = hn::Add(r, hn::IfThenElseZero(up, v_one));
        VU enc = hn::Add(enc_base, r);
        // Overflow: the max finite where saturating or rounding the magnitude down, else Inf/NaN.
        VU on_overflow = v_overflow;
        if (o.saturate || Mode == RoundingMode::toward_zero || Mode == RoundingMode::to_odd) on_overflow = v_max;
        else if (Mode == RoundingMode::toward_positive) on_overflow = hn::IfThenElse(negative, v_max, v_overflow);
        else if (Mode == RoundingMode::toward_negative) on_overflow = hn::IfThenElse(negative, v_overflow, v_max);
        enc = hn::IfThenElse(hn::Gt(enc, v_max), on_overflow, enc);
        if (o.flush_output) enc = hn::IfThenZeroElse(hn::Lt(enc, v_min_normal), enc);
        VU sign_bits = hn::ShiftRightSame(sign, sign_shift);
        if (fnuz) sign_bits = hn::IfThenZeroElse(hn::Eq(enc, hn::Zero(du)), sign_bits);
        enc = hn::Or(enc, sign_bits);
        if constexpr (sizeof(Bits) == 4) {
            hn::StoreU(enc, du, out + i);
        } else {
            hn::StoreU(hn::DemoteTo(dout, hn::BitCast(di, enc)), dout, out + i);
        }
        if (!hn::AllFalse(du, need_scalar)) {
            for (std::size_t l = 0; l < lanes; ++l) {
                const float v = in[i + l];
                const std::uint32_t u = bits_of(v) & 0x7FFFFFFFu;
                if (u >= 0x7F800000u || Mode == RoundingMode::stochastic_exact)
                    out[i + l] = static_cast<Bits>(cast_from_f32(v, to, o, first_index + i + l));
            }
        }
    }
    for (; i < n; ++i) out[i] = static_cast<Bits>(cast_from_f32(in[i], to, o, first_index + i));
}

// bf16 (and f32) in nearest-even without saturation or flushing: the classic add-half trick on the
// whole float32 pattern (sign included; a carry out of the fraction lands in the exponent, and
// overflow lands on Inf). Only NaN lanes need the scalar routine.
template <class Bits>
void cast_f32_rne_same_exponent(const SimdCastJob& job, const float* HWY_RESTRICT in, Bits* HWY_RESTRICT out,
                                std::size_t n, std::uint64_t first_index) {
    const hn::ScalableTag<float> df;
    const hn::RebindToUnsigned<decltype(df)> du;
    const hn::RebindToSigned<decltype(df)> di;
    const hn::Rebind<Bits, decltype(du)> dout;
    const int shift = 23 - job.to->man_bits;
    const auto v_one = hn::Set(du, 1u);
    const auto v_half_minus_one = hn::Set(du, (1u << (shift - 1)) - 1);
    const auto v_magnitude = hn::Set(du, 0x7FFFFFFFu);
    const auto v_inf = hn::Set(du, 0x7F800000u);
    const std::size_t lanes = hn::Lanes(du);
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes) {
        const auto x = hn::BitCast(du, hn::LoadU(df, in + i));
        const auto lsb = hn::And(hn::ShiftRightSame(x, shift), v_one);
        const auto enc = hn::ShiftRightSame(hn::Add(hn::Add(x, v_half_minus_one), lsb), shift);
        if constexpr (sizeof(Bits) == 4) {
            hn::StoreU(enc, du, out + i);
        } else {
            hn::StoreU(hn::DemoteTo(dout, hn::BitCast(di, enc)), dout, out + i);
        }
        if (!hn::AllFalse(du, hn::Gt(hn::And(x, v_magnitude), v_inf))) {
            for (std::size_t l = 0; l < lanes; ++l)
                if ((bits_of(in[i + l]) & 0x7FFFFFFFu) > 0x7F800000u)
                    out[i + l] = static_cast<Bits>(cast_from_f32(in[i + l], *job.to, *job.options, first_index + i + l));
        }
    }
    for (; i < n; ++i) out[i] = static_cast<Bits>(cast_from_f32(in[i], *job.to, *job.options, first_index + i));
}

template <bool SameExponent, class Bits>
void cast_f32_dispatch_mode(const SimdCastJob& job, const float* in, const std::uint32_t* words, Bits* out,
                            std::size_t n, std::uint64_t first) {
    switch (job.options->mode) {
        case RoundingMode::nearest_even: return cast_f32_kernel<RoundingMode::nearest_even, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::nearest_away: return cast_f32_kernel<RoundingMode::nearest_away, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::toward_zero: return cast_f32_kernel<RoundingMode::toward_zero, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::toward_positive: return cast_f32_kernel<RoundingMode::toward_positive, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::toward_negative: return cast_f32_kernel<RoundingMode::toward_negative, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::to_odd: return cast_f32_kernel<RoundingMode::to_odd, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::stochastic_exact: return cast_f32_kernel<RoundingMode::stochastic_exact, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::stochastic_bits: return cast_f32_kernel<RoundingMode::stochastic_bits, SameExponent>(job, in, words, out, n, first);
    }
}

template <class Bits>
void cast_f32_dispatch(const SimdCastJob& job, const float* in, const std::uint32_t* words, Bits* out, std::size_t n,
                       std::uint64_t first) {
    const Format& to = *job.to;
    const CastOptions& o = *job.options;
    const bool same_exponent = to.encoding == Encoding::ieee && to.exp_bits == 8 && to.bias == 127;
    if (same_exponent && to.man_bits < 23 && o.mode == RoundingMode::nearest_even && !o.saturate && !o.flush_input &&
        !o.flush_output)
        cast_f32_rne_same_exponent(job, in, out, n, first);
    else if (same_exponent)
        cast_f32_dispatch_mode<true>(job, in, words, out, n, first);
    else
        cast_f32_dispatch_mode<false>(job, in, words, out, n, first);
}

void CastF32To8(const SimdCastJob& job, const float* in, const std::uint32_t* words, std::uint8_t* out, std::size_t n, std::uint64_t first) {
    cast_f32_dispatch(job, in, words, out, n, first);
}
void CastF32To16(const SimdCastJob& job, const float* in, const std::uint32_t* words, std::uint16_t* out, std::size_t n, std::uint64_t first) {
    cast_f32_dispatch(job, in, words, out, n, first);
}
void CastF32To32(const SimdCastJob& job, const float* in, const std::uint32_t* words, std::uint32_t* out, std::size_t n, std::uint64_t first) {
    cast_f32_dispatch(job, in, words, out, n, first);
}

}  // namespace roundscope::emu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace roundscope::emu {
HWY_EXPORT(CastF32To8);
HWY_EXPORT(CastF32To16);
HWY_EXPORT(CastF32To32);

void simd_cast_f32(const SimdCastJob& job, const float* in, const std::uint32_t* words, std::uint8_t* out, std::size_t n, std::uint64_t first) {
    HWY_DYNAMIC_DISPATCH(CastF32To8)(job, in, words, out, n, first);
}
void simd_cast_f32(const SimdCastJob& job, const float* in, const std::uint32_t* words, std::uint16_t* out, std::size_t n, std::uint64_t first) {
    HWY_DYNAMIC_DISPATCH(CastF32To16)(job, in, words, out, n, first);
}
void simd_cast_f32(const SimdCastJob& job, const float* in, const std::uint32_t* words, std::uint32_t* out, std::size_t n, std::uint64_t first) {
    HWY_DYNAMIC_DISPATCH(CastF32To32)(job, in, words, out, n, first);
}

}  // namespace roundscope::emu
#endif
