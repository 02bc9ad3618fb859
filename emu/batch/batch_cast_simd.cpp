// The SIMD kernel of the batch casts: round_to_format (round.hpp) restated on vectors of float32
// or float64 bit patterns, for the targets whose exponent range lies inside float32's (f32, f16,
// bf16, FP8, FP6, FP4). Lanes it does not serve — NaN, Inf, and exact stochastic rounding whose
// fraction needs more than 32 random bits — are finished by the scalar routine itself, so every
// lane's bits are the scalar routine's (tests/emu/batch/test_batch_*.cpp).
#include "emu/batch/batch_cast_simd.hpp"

#include <algorithm>

#include "emu/numbers/round.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "emu/batch/batch_cast_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace roundscope::emu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The source's bit layout (IEEE binary32 or binary64).
template <class Real>
struct Source;
template <>
struct Source<float> {
    using Bits = std::uint32_t;
    static constexpr int man = 23, bias = 127;
};
template <>
struct Source<double> {
    using Bits = std::uint64_t;
    static constexpr int man = 52, bias = 1023;
};

// a >= b (Highway 1.0 has no integer Ge).
template <class V>
HWY_INLINE auto ge(V a, V b) {
    return hn::Not(hn::Lt(a, b));
}

// The scalar routine for one element: the fix-up of lanes the vectors leave.
HWY_INLINE std::uint64_t scalar_cast(float x, const Format& to, const CastOptions& o, std::uint64_t index) {
    return cast_from_f32(x, to, o, index);
}
HWY_INLINE std::uint64_t scalar_cast(double x, const Format& to, const CastOptions& o, std::uint64_t index) {
    return cast_from_f64(x, to, o, index);
}

// Narrows lanes holding values below 2^(8 * sizeof(Bits)) and stores them.
template <class Bits, class DU, class V>
HWY_INLINE void store_narrow(DU du, V v, Bits* HWY_RESTRICT out) {
    const hn::Rebind<Bits, DU> dout;
    if constexpr (sizeof(Bits) == sizeof(hn::TFromD<DU>)) {
        hn::StoreU(v, du, out);
    } else if constexpr (sizeof(hn::TFromD<DU>) == 4) {
        hn::StoreU(hn::DemoteTo(dout, hn::BitCast(hn::RebindToSigned<DU>(), v)), dout, out);
    } else {
        hn::StoreU(hn::TruncateTo(dout, v), dout, out);
    }
}

// Vectors are processed in passes of this many elements. Lanes a vector cannot serve are only
// flagged inside the vector loop and finished after it: a call in the loop would make the
// compiler keep every vector in memory.
constexpr std::size_t pass_elements = 1024;

// Finishes, with the scalar routine, the elements of in[0, count) for which needs_scalar(x) holds.
template <class Real, class Bits, class NeedsScalar>
HWY_NOINLINE void finish_range(const Real* in, Bits* out, std::size_t count, const SimdCastJob& job,
                               std::uint64_t first_index, NeedsScalar needs_scalar) {
    for (std::size_t i = 0; i < count; ++i)
        if (needs_scalar(in[i])) out[i] = static_cast<Bits>(scalar_cast(in[i], *job.to, *job.options, first_index + i));
}

// The same for the lanes of the vectors flagged in `flagged`.
template <class Real, class Bits, class NeedsScalar>
void finish_flagged(const std::uint8_t* flagged, std::size_t vectors, std::size_t lanes, const Real* in, Bits* out,
                    const SimdCastJob& job, std::uint64_t first_index, NeedsScalar needs_scalar) {
    for (std::size_t v = 0; v < vectors; ++v)
        if (flagged[v])
            finish_range(in + v * lanes, out + v * lanes, lanes, job, first_index + v * lanes, needs_scalar);
}

// One 32-bit random word per lane, widened to the lane type.
template <class DU>
HWY_INLINE hn::Vec<DU> load_words(DU du, const std::uint32_t* HWY_RESTRICT words) {
    if constexpr (sizeof(hn::TFromD<DU>) == 4) {
        return hn::LoadU(du, words);
    } else {
        return hn::PromoteTo(du, hn::LoadU(hn::Rebind<std::uint32_t, DU>(), words));
    }
}

// SameExponent: the target has float32's exponent field (bf16, f32) and the source is float32,
// so every finite input is rounded at the same bit, 23 - man_bits, and the shifted pattern is
// already the encoding. Every comparison is on values below 2^(lane bits - 1), so signed.
template <class Real, RoundingMode Mode, bool SameExponent, class Bits>
void cast_kernel(const SimdCastJob& job, const Real* HWY_RESTRICT in, const std::uint32_t* HWY_RESTRICT words,
                 Bits* HWY_RESTRICT out, std::size_t n, std::uint64_t first_index) {
    using S = Source<Real>;
    using U = typename S::Bits;
    const hn::ScalableTag<Real> df;
    const hn::RebindToUnsigned<decltype(df)> du;
    const hn::RebindToSigned<decltype(df)> di;
    using VU = hn::Vec<decltype(du)>;
    using VI = hn::Vec<decltype(di)>;
    constexpr int lane_bits = 8 * sizeof(U);
    const Format& to = *job.to;
    const CastOptions& o = *job.options;
    const int man = to.man_bits, e_min = emin(to);
    const VU v_one = hn::Set(du, U{1});
    const VI v_max = hn::Set(di, static_cast<hn::TFromD<decltype(di)>>(max_finite_bits(to)));
    const VU v_overflow = hn::Set(du, static_cast<U>(detail::overflow_value(to, false)));
    const VI v_min_normal = hn::Set(di, hn::TFromD<decltype(di)>{1} << man);
    const VU v_sign_bit = hn::Set(du, U{1} << (lane_bits - 1));
    const VI v_inf =
        hn::Set(di, static_cast<hn::TFromD<decltype(di)>>(((U{1} << (lane_bits - 1 - S::man)) - 1) << S::man));
    const VU v_fraction = hn::Set(du, (U{1} << S::man) - 1);
    const VU v_hidden = hn::Set(du, U{1} << S::man);
    const bool fnuz = to.encoding == Encoding::fnuz;
    const int sign_shift = lane_bits - to.bits;
    // The add-half trick below needs a rounding position of at least one bit (not f32 -> f32).
    const bool round_by_adding = Mode == RoundingMode::nearest_even && (!SameExponent || man < S::man);
    const std::size_t lanes = hn::Lanes(du);
    auto random_words = [&](std::size_t i) { return load_words(du, words + i); };

    for (std::size_t start = 0; start < n; start += pass_elements) {
        const std::size_t end = std::min(n, start + pass_elements);
        std::uint8_t flagged[pass_elements];
        std::size_t vectors = 0, i = start;
        for (; i + lanes <= end; i += lanes) {
            const VU x = hn::BitCast(du, hn::LoadU(df, in + i));
            const VU sign = hn::And(x, v_sign_bit);
            const auto negative = hn::Ne(sign, hn::Zero(du));
            VU a = hn::AndNot(v_sign_bit, x);
            const VU field = hn::ShiftRight<S::man>(a);
            const auto input_subnormal = hn::Eq(field, hn::Zero(du));
            if (o.flush_input) a = hn::IfThenZeroElse(input_subnormal, a);
            auto need_scalar = hn::RebindMask(du, ge(hn::BitCast(di, a), v_inf));  // Inf, NaN
            VU m, r, unit, enc_base, sc;
            VI s;
            if constexpr (SameExponent) {
                const int shift = S::man - man;
                s = hn::Set(di, shift);
                sc = hn::Set(du, static_cast<U>(shift));
                m = a;
                r = hn::ShiftRightSame(a, shift);
                unit = hn::Set(du, U{1} << shift);
                enc_base = hn::Zero(du);
            } else {
                m = hn::IfThenElse(input_subnormal, a, hn::Or(hn::And(a, v_fraction), v_hidden));
                // |x| = m * 2^(eb - bias - man_src); quantum exponent Q = max(eb - bias, emin) - man;
                // s = Q - (eb - bias - man_src).
                const VI eb = hn::BitCast(di, hn::Max(field, v_one));
                const VI ebase = hn::Max(hn::Sub(eb, hn::Set(di, S::bias)), hn::Set(di, e_min));
                s = hn::Sub(hn::Sub(ebase, eb), hn::Set(di, man - S::bias - S::man));
                sc = hn::BitCast(du, hn::Min(s, hn::Set(di, lane_bits - 1)));
                r = hn::Shr(m, sc);
                unit = hn::Shl(v_one, sc);
                // Encoding of r * 2^Q: ((max(E, emin) - emin) << man) + r, the carry of r included.
                enc_base = hn::ShiftLeftSame(hn::BitCast(du, hn::Sub(ebase, hn::Set(di, e_min))), man);
            }
            const VI rem = hn::BitCast(di, hn::And(m, hn::Sub(unit, v_one)));
            const VI half = hn::BitCast(di, hn::ShiftRight<1>(unit));
            const auto inexact = hn::RebindMask(du, hn::Ne(rem, hn::Zero(di)));
            auto up = hn::Ne(v_one, v_one);
            if constexpr (Mode == RoundingMode::nearest_even) {
                if (round_by_adding) {
                    // Adding half - 1 plus the kept last bit carries exactly when the discarded part
                    // exceeds half, or equals it and the kept part is odd.
                    r = hn::Shr(hn::Add(hn::Add(m, hn::Sub(hn::BitCast(du, half), v_one)), hn::And(r, v_one)), sc);
                } else {
                    const auto r_odd = hn::Ne(hn::And(r, v_one), hn::Zero(du));
                    up = hn::Or(hn::RebindMask(du, hn::Gt(rem, half)),
                                hn::And(hn::And(hn::RebindMask(du, hn::Eq(rem, half)), inexact), r_odd));
                }
            } else if constexpr (Mode == RoundingMode::nearest_away) {
                up = hn::And(hn::RebindMask(du, ge(rem, half)), inexact);
            } else if constexpr (Mode == RoundingMode::toward_positive) {
                up = hn::AndNot(negative, inexact);
            } else if constexpr (Mode == RoundingMode::toward_negative) {
                up = hn::And(negative, inexact);
            } else if constexpr (Mode == RoundingMode::to_odd) {
                r = hn::Or(r, hn::IfThenElseZero(inexact, v_one));
            } else if constexpr (Mode == RoundingMode::stochastic_exact) {
                // U < rem / 2^s with U = w(0) / 2^32 decides whenever s <= 32.
                const VU w = random_words(i);
                const VI t = hn::BitCast(
                    di, hn::Shl(hn::BitCast(du, rem),
                                hn::BitCast(
                                    du, hn::Max(hn::Sub(hn::Set(di, 32), hn::Min(s, hn::Set(di, 32))), hn::Zero(di)))));
                const VI t_clamped = hn::IfThenElse(hn::Eq(s, hn::Zero(di)), hn::Zero(di), t);
                if constexpr (sizeof(U) == 4) {
                    up = hn::And(hn::Lt(w, hn::BitCast(du, t_clamped)), inexact);  // 32-bit words: unsigned
                } else {
                    up = hn::And(hn::RebindMask(du, hn::Lt(hn::BitCast(di, w), t_clamped)), inexact);
                }
                need_scalar = hn::Or(need_scalar, hn::And(hn::RebindMask(du, hn::Gt(s, hn::Set(di, 32))), inexact));
            } else if constexpr (Mode == RoundingMode::stochastic_bits) {
                const int nbits = o.sr_bits;
                const VU w = random_words(i);
                const VI shift_down = hn::Sub(s, hn::Set(di, nbits));
                const VU leading = hn::IfThenElse(
                    hn::RebindMask(du, ge(shift_down, hn::Zero(di))),
                    hn::Shr(hn::BitCast(du, rem), hn::BitCast(du, hn::Min(shift_down, hn::Set(di, lane_bits - 1)))),
                    hn::Shl(hn::BitCast(du, rem),
                            hn::BitCast(du, hn::Min(hn::Neg(shift_down), hn::Set(di, lane_bits - 1)))));
                const VU random = hn::ShiftRightSame(w, 32 - nbits);
                up = hn::And(hn::RebindMask(du, ge(hn::BitCast(di, hn::Add(leading, random)),
                                                   hn::Set(di, hn::TFromD<decltype(di)>{1} << nbits))),
                             inexact);
            }
            r = hn::Add(r, hn::IfThenElseZero(up, v_one));
            VU enc = hn::Add(enc_base, r);
            // Overflow: the max finite where saturating or rounding the magnitude down, else Inf/NaN.
            const VU v_max_u = hn::BitCast(du, v_max);
            VU on_overflow = v_overflow;
            if (o.saturate || Mode == RoundingMode::toward_zero || Mode == RoundingMode::to_odd)
                on_overflow = v_max_u;
            else if (Mode == RoundingMode::toward_positive)
                on_overflow = hn::IfThenElse(negative, v_max_u, v_overflow);
            else if (Mode == RoundingMode::toward_negative)
                on_overflow = hn::IfThenElse(negative, v_overflow, v_max_u);
            enc = hn::IfThenElse(hn::RebindMask(du, hn::Gt(hn::BitCast(di, enc), v_max)), on_overflow, enc);
            if (o.flush_output)
                enc = hn::IfThenZeroElse(hn::RebindMask(du, hn::Lt(hn::BitCast(di, enc), v_min_normal)), enc);
            VU sign_bits = hn::ShiftRightSame(sign, sign_shift);
            if (fnuz) sign_bits = hn::IfThenZeroElse(hn::Eq(enc, hn::Zero(du)), sign_bits);
            store_narrow(du, hn::Or(enc, sign_bits), out + i);
            flagged[vectors++] = !hn::AllFalse(du, need_scalar);
        }
        for (; i < end; ++i) out[i] = static_cast<Bits>(scalar_cast(in[i], to, o, first_index + i));
        constexpr U inf_bits = ((U{1} << (lane_bits - 1 - S::man)) - 1) << S::man;
        finish_flagged(flagged, vectors, lanes, in + start, out + start, job, first_index + start, [](Real v) {
            return (bits_of(v) & ~(U{1} << (lane_bits - 1))) >= inf_bits || Mode == RoundingMode::stochastic_exact;
        });
    }
}

// bf16 from float32 in nearest-even without saturation or flushing: detail::rne_on_f32_bits
// (round.hpp) on lanes, the whole pattern (sign included; a carry out of the fraction lands in the
// exponent, and overflow lands on Inf). Only NaN lanes need the scalar routine.
template <class Bits>
void cast_f32_rne_same_exponent(const SimdCastJob& job, const float* HWY_RESTRICT in, Bits* HWY_RESTRICT out,
                                std::size_t n, std::uint64_t first_index) {
    const hn::ScalableTag<float> df;
    const hn::RebindToUnsigned<decltype(df)> du;
    const int shift = 23 - job.to->man_bits;
    const auto v_one = hn::Set(du, 1u);
    const auto v_half_minus_one = hn::Set(du, (1u << (shift - 1)) - 1);
    const auto v_magnitude = hn::Set(du, 0x7FFFFFFFu);
    const auto v_inf = hn::Set(du, 0x7F800000u);
    const std::size_t lanes = hn::Lanes(du);
    for (std::size_t start = 0; start < n; start += pass_elements) {
        const std::size_t end = std::min(n, start + pass_elements);
        auto nan_seen = hn::Zero(du);  // NaN lanes of the pass, or-ed together
        std::size_t i = start;
        for (; i + lanes <= end; i += lanes) {
            const auto x = hn::BitCast(du, hn::LoadU(df, in + i));
            const auto lsb = hn::And(hn::ShiftRightSame(x, shift), v_one);
            const auto enc = hn::ShiftRightSame(hn::Add(hn::Add(x, v_half_minus_one), lsb), shift);
            if constexpr (sizeof(Bits) == 4) {
                hn::StoreU(enc, du, out + i);
            } else {
                const hn::Rebind<Bits, decltype(du)> dout;
                hn::StoreU(hn::DemoteTo(dout, hn::BitCast(hn::RebindToSigned<decltype(du)>(), enc)), dout, out + i);
            }
            nan_seen = hn::Or(nan_seen, hn::VecFromMask(du, hn::Gt(hn::And(x, v_magnitude), v_inf)));
        }
        for (; i < end; ++i) out[i] = static_cast<Bits>(cast_from_f32(in[i], *job.to, *job.options, first_index + i));
        if (!hn::AllFalse(du, hn::Ne(nan_seen, hn::Zero(du)))) {
            finish_range(in + start, out + start, end - start, job, first_index + start,
                         [](float v) { return (bits_of(v) & 0x7FFFFFFFu) > 0x7F800000u; });
        }
    }
}

template <class Real, bool SameExponent, class Bits>
void dispatch_mode(const SimdCastJob& job, const Real* in, const std::uint32_t* words, Bits* out, std::size_t n,
                   std::uint64_t first) {
    switch (job.options->mode) {
        case RoundingMode::nearest_even:
            return cast_kernel<Real, RoundingMode::nearest_even, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::nearest_away:
            return cast_kernel<Real, RoundingMode::nearest_away, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::toward_zero:
            return cast_kernel<Real, RoundingMode::toward_zero, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::toward_positive:
            return cast_kernel<Real, RoundingMode::toward_positive, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::toward_negative:
            return cast_kernel<Real, RoundingMode::toward_negative, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::to_odd:
            return cast_kernel<Real, RoundingMode::to_odd, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::stochastic_exact:
            return cast_kernel<Real, RoundingMode::stochastic_exact, SameExponent>(job, in, words, out, n, first);
        case RoundingMode::stochastic_bits:
            return cast_kernel<Real, RoundingMode::stochastic_bits, SameExponent>(job, in, words, out, n, first);
    }
}

template <class Real, class Bits>
void dispatch(const SimdCastJob& job, const Real* in, const std::uint32_t* words, Bits* out, std::size_t n,
              std::uint64_t first) {
    const Format& to = *job.to;
    const CastOptions& o = *job.options;
    if constexpr (std::is_same_v<Real, float>) {
        if (to.encoding == Encoding::ieee && to.exp_bits == 8 && to.bias == 127) {
            if (shares_f32_exponent(to) && o.mode == RoundingMode::nearest_even && !o.saturate && !o.flush_input &&
                !o.flush_output)
                return cast_f32_rne_same_exponent(job, in, out, n, first);
            return dispatch_mode<Real, true>(job, in, words, out, n, first);
        }
    }
    dispatch_mode<Real, false>(job, in, words, out, n, first);
}

void CastF32To8(const SimdCastJob& j, const float* in, const std::uint32_t* w, std::uint8_t* out, std::size_t n,
                std::uint64_t first) {
    dispatch(j, in, w, out, n, first);
}
void CastF32To16(const SimdCastJob& j, const float* in, const std::uint32_t* w, std::uint16_t* out, std::size_t n,
                 std::uint64_t first) {
    dispatch(j, in, w, out, n, first);
}
void CastF32To32(const SimdCastJob& j, const float* in, const std::uint32_t* w, std::uint32_t* out, std::size_t n,
                 std::uint64_t first) {
    dispatch(j, in, w, out, n, first);
}
void CastF64To8(const SimdCastJob& j, const double* in, const std::uint32_t* w, std::uint8_t* out, std::size_t n,
                std::uint64_t first) {
    dispatch(j, in, w, out, n, first);
}
void CastF64To16(const SimdCastJob& j, const double* in, const std::uint32_t* w, std::uint16_t* out, std::size_t n,
                 std::uint64_t first) {
    dispatch(j, in, w, out, n, first);
}
void CastF64To32(const SimdCastJob& j, const double* in, const std::uint32_t* w, std::uint32_t* out, std::size_t n,
                 std::uint64_t first) {
    dispatch(j, in, w, out, n, first);
}

}  // namespace roundscope::emu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace roundscope::emu {
HWY_EXPORT(CastF32To8);
HWY_EXPORT(CastF32To16);
HWY_EXPORT(CastF32To32);
HWY_EXPORT(CastF64To8);
HWY_EXPORT(CastF64To16);
HWY_EXPORT(CastF64To32);

void simd_cast(const SimdCastJob& j, const float* in, const std::uint32_t* w, std::uint8_t* out, std::size_t n,
               std::uint64_t first) {
    HWY_DYNAMIC_DISPATCH(CastF32To8)(j, in, w, out, n, first);
}
void simd_cast(const SimdCastJob& j, const float* in, const std::uint32_t* w, std::uint16_t* out, std::size_t n,
               std::uint64_t first) {
    HWY_DYNAMIC_DISPATCH(CastF32To16)(j, in, w, out, n, first);
}
void simd_cast(const SimdCastJob& j, const float* in, const std::uint32_t* w, std::uint32_t* out, std::size_t n,
               std::uint64_t first) {
    HWY_DYNAMIC_DISPATCH(CastF32To32)(j, in, w, out, n, first);
}
void simd_cast(const SimdCastJob& j, const double* in, const std::uint32_t* w, std::uint8_t* out, std::size_t n,
               std::uint64_t first) {
    HWY_DYNAMIC_DISPATCH(CastF64To8)(j, in, w, out, n, first);
}
void simd_cast(const SimdCastJob& j, const double* in, const std::uint32_t* w, std::uint16_t* out, std::size_t n,
               std::uint64_t first) {
    HWY_DYNAMIC_DISPATCH(CastF64To16)(j, in, w, out, n, first);
}
void simd_cast(const SimdCastJob& j, const double* in, const std::uint32_t* w, std::uint32_t* out, std::size_t n,
               std::uint64_t first) {
    HWY_DYNAMIC_DISPATCH(CastF64To32)(j, in, w, out, n, first);
}

}  // namespace roundscope::emu
#endif
