// The vector kernel of mma_gemm: fused_dot_add (fused_dot_add.hpp) restated on lanes of
// doubles, several vectors of columns at a time so that the Emax and sum chains overlap.
// Every lane's bits equal the scalar engine's (tests/emu/mma/test_mma_gemm.cpp).
#include "emu/mma/mma_gemm_simd.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "emu/mma/mma_gemm_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace roundscope::emu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<double>;
using DI = hn::RebindToSigned<D>;
using DU = hn::RebindToUnsigned<D>;
using V = hn::Vec<D>;

// 2^e for integer-valued e in the normal range of doubles. Adding 2^52 + 1023 puts the biased
// exponent e + 1023 in the low mantissa bits, which the shift moves into the exponent field:
// exact, and without a double-to-int64 conversion (AVX2 has none; Highway emulates it slowly).
HWY_INLINE V exp2_int(V e) {
    const DI di;
    const auto biased = hn::BitCast(di, hn::Add(e, hn::Set(D(), 0x1p52 + 1023)));
    return hn::BitCast(D(), hn::ShiftLeft<52>(biased));
}

// The alignment exponent of an accumulator value (a float32 held exactly): floor(log2 |x|),
// at least -126 (float32 subnormals); e_zero for zero. The biased exponent becomes a double by
// the mantissa of 2^52, again without an int64 conversion.
HWY_INLINE V accumulator_exponent(V x, V e_zero) {
    const DI di;
    const V two52 = hn::Set(D(), 0x1p52);
    const auto biased = hn::And(hn::ShiftRight<52>(hn::BitCast(di, x)), hn::Set(di, 0x7FF));
    const V biased_value = hn::Sub(hn::BitCast(D(), hn::Or(biased, hn::BitCast(di, two52))), two52);
    const V e = hn::Max(hn::Sub(biased_value, hn::Set(D(), 1023.0)), hn::Set(D(), -126.0));
    return hn::IfThenElse(hn::Eq(x, hn::Zero(D())), e_zero, e);
}

// x (an exact double) truncated toward zero onto the float32 grid with `fraction_bits` (23, or
// 13 for e8m13) below the leading bit, float32 subnormals kept, 2^128 and above to Inf.
HWY_INLINE V truncate_to_f32_grid_any(V x, int fraction_bits) {
    const DI di;
    const DU du;
    const auto bits = hn::BitCast(di, x);
    const auto biased = hn::And(hn::ShiftRight<52>(bits), hn::Set(di, 0x7FF));
    // Bits to clear: 52 - fraction_bits, plus one for each binade below float32's 2^-126.
    const auto below = hn::Max(hn::Sub(hn::Set(di, 1023 - 126), biased), hn::Zero(di));
    const auto shift = hn::Min(hn::Add(below, hn::Set(di, 52 - fraction_bits)), hn::Set(di, 63));
    const auto one = hn::Set(du, 1);
    const auto keep = hn::Not(hn::Sub(hn::Shl(one, hn::BitCast(du, shift)), one));
    const V truncated = hn::BitCast(D(), hn::And(hn::BitCast(du, bits), keep));
    const auto overflow = hn::RebindMask(D(), hn::Gt(biased, hn::Set(di, 1023 + 127)));
    return hn::IfThenElse(overflow, hn::CopySign(hn::Inf(D()), x), truncated);
}

// The same, with one mask for every lane where all of them are zero or in float32's normal range
// (the usual case), and the general rule otherwise.
HWY_INLINE V truncate_to_f32_grid(V x, int fraction_bits) {
    const D d;
    const DU du;
    const V magnitude = hn::Abs(x);
    const auto normal_or_zero = hn::Or(hn::Ge(magnitude, hn::Set(d, 0x1p-126)), hn::Eq(x, hn::Zero(d)));
    if (!hn::AllTrue(d, normal_or_zero)) return truncate_to_f32_grid_any(x, fraction_bits);
    const auto keep = hn::Set(du, ~((std::uint64_t{1} << (52 - fraction_bits)) - 1));
    const V truncated = hn::BitCast(d, hn::And(hn::BitCast(du, x), keep));
    return hn::IfThenElse(hn::Ge(magnitude, hn::Set(d, 0x1p128)), hn::CopySign(hn::Inf(d), x), truncated);
}

// One truncated fused dot-product-add over a block, for G vectors of columns.
template <int G>
HWY_INLINE void fused_block(const MmaSimdJob& job, const double* a_value, const double* a_exponent, std::int64_t k0,
                            int begin, int end, std::int64_t j0, V (&acc)[G]) {
    const D d;
    const hn::Rebind<std::int32_t, D> di32;
    const hn::Rebind<float, D> df;
    const V e_zero = hn::Set(d, job.zero_exponent);
    const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
    V e_max[G];
    for (int g = 0; g < G; ++g) e_max[g] = accumulator_exponent(acc[g], e_zero);
    for (int t = begin; t < end; ++t) {
        const std::int64_t k = k0 + job.order[t];
        const V ea = hn::Set(d, a_exponent[k]);
        const std::int32_t* eb = job.b_exponent + k * job.n + j0;
        for (int g = 0; g < G; ++g) {
            e_max[g] = hn::Max(e_max[g], hn::Add(ea, hn::PromoteTo(d, hn::LoadU(di32, eb + g * lanes))));
        }
    }
    V scale[G], sum[G];
    for (int g = 0; g < G; ++g) {
        scale[g] = exp2_int(hn::Sub(hn::Set(d, job.alignment_bits), e_max[g]));
        // Starting from +0 makes an exact zero sum +0, as the scalar engine gives.
        sum[g] = hn::Add(hn::Zero(d), hn::Trunc(hn::Mul(acc[g], scale[g])));
    }
    for (int t = begin; t < end; ++t) {
        const std::int64_t k = k0 + job.order[t];
        const V a = hn::Set(d, a_value[k]);
        const float* b = job.b_value + k * job.n + j0;
        for (int g = 0; g < G; ++g) {
            const V b_g = hn::PromoteTo(d, hn::LoadU(df, b + g * lanes));
            sum[g] = hn::Add(sum[g], hn::Trunc(hn::Mul(hn::Mul(a, b_g), scale[g])));
        }
    }
    const int fraction_bits = job.e8m13 ? 13 : 23;
    for (int g = 0; g < G; ++g) {
        const V exact = hn::Mul(sum[g], exp2_int(hn::Sub(e_max[g], hn::Set(d, job.alignment_bits))));
        // + 0 turns a -0 from a negative sum below the grid into +0, as the scalar engine does.
        const V rounded = hn::Add(truncate_to_f32_grid(exact, fraction_bits), hn::Zero(d));
        acc[g] = hn::IfThenElse(hn::IsInf(acc[g]), acc[g], rounded);  // an Inf accumulator stays
    }
}

// float32 round-to-nearest-even of a double, overflow to Inf included: Highway's portable
// targets saturate DemoteTo at the largest float instead, so the lanes from float32's
// rounding boundary 2^128 - 2^103 up are set here on every target.
HWY_INLINE hn::Vec<hn::Rebind<float, D>> to_f32_rn(V x) {
    const hn::Rebind<float, D> df;
    const auto y = hn::DemoteTo(df, x);
    // Masks do not change lane width: carry the overflow lanes over as 1.0 in a float vector.
    const V overflow = hn::IfThenElseZero(hn::Ge(hn::Abs(x), hn::Set(D(), 0x1.ffffffp127)), hn::Set(D(), 1.0));
    return hn::IfThenElse(hn::Eq(hn::DemoteTo(df, overflow), hn::Set(df, 1.0f)), hn::CopySign(hn::Inf(df), y), y);
}

// float32 round-to-nearest-even of an exact double sum of two float32 (double rounding is
// innocuous for addition: 53 >= 2 * 24 + 2).
HWY_INLINE V add_f32_rn(V x, V y) { return hn::PromoteTo(D(), to_f32_rn(hn::Add(x, y))); }

// Columns j0 .. j0 + G vectors of row r.
template <int G>
HWY_INLINE void row_columns(const MmaSimdJob& job, std::int64_t r, std::int64_t j0) {
    const D d;
    const hn::Rebind<float, D> df;
    const hn::Rebind<std::uint32_t, D> du32;
    const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
    const double* a_value = job.a_value + r * job.k_padded;
    const double* a_exponent = job.a_exponent + r * job.k_padded;
    const std::uint32_t* c_row = job.c + r * job.n;
    std::uint32_t* d_row = job.d + r * job.n;
    V c[G], acc[G];
    for (int g = 0; g < G; ++g) {
        c[g] = hn::PromoteTo(d, hn::BitCast(df, hn::LoadU(du32, c_row + j0 + g * lanes)));
    }
    for (std::int64_t k0 = 0; k0 < job.k_padded; k0 += job.instruction_k) {
        for (int g = 0; g < G; ++g) acc[g] = job.c_added_after ? hn::Zero(d) : c[g];
        for (int block = 0; block < job.blocks; ++block) {
            fused_block<G>(job, a_value, a_exponent, k0, job.block_begin[block], job.block_begin[block + 1], j0, acc);
        }
        for (int g = 0; g < G; ++g) c[g] = job.c_added_after ? add_f32_rn(acc[g], c[g]) : acc[g];
    }
    const auto canonical_nan = hn::Set(du32, 0x7FFFFFFFu);
    for (int g = 0; g < G; ++g) {
        const auto value = to_f32_rn(c[g]);  // exact: c holds float32 values
        const auto bits = hn::BitCast(du32, value);
        const auto nan = hn::RebindMask(du32, hn::IsNaN(value));
        hn::StoreU(hn::IfThenElse(nan, canonical_nan, bits), du32, d_row + j0 + g * lanes);
    }
}

std::int64_t MmaRow(const MmaSimdJob& job) {
    constexpr int wide = 4;  // four independent chains hide the latency of Max and Add
    const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(D()));
    std::int64_t j = 0;
    for (; j + wide * lanes <= job.n; j += wide * lanes) {
        for (std::int64_t r = 0; r < job.rows; ++r) row_columns<wide>(job, r, j);
    }
    for (; j + lanes <= job.n; j += lanes) {
        for (std::int64_t r = 0; r < job.rows; ++r) row_columns<1>(job, r, j);
    }
    return j;
}

}  // namespace roundscope::emu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace roundscope::emu {
HWY_EXPORT(MmaRow);

std::int64_t mma_row_simd(const MmaSimdJob& job) { return HWY_DYNAMIC_DISPATCH(MmaRow)(job); }

}  // namespace roundscope::emu
#endif
