#pragma once
// The scalar tensor-core engine: one output element of D = A*B + C under an MmaModel
// (mma_model.hpp), in integer arithmetic, exactly as the model states it. It is the reference
// that the fast GEMM driver (mma_gemm.cpp) and the CUDA code are checked against.
//
// Sizes: a product of two significands of at most 11 bits has at most 22 bits, and its value
// is below 4 * 2^(e_a + e_b); after alignment to 2^(Emax - F) each truncated term is below
// 2^(F + 2), so a block of 32 products and the accumulator sum to less than 2^(F + 8) in
// magnitude: an int64 holds it for every F up to 55.
#include <cstdint>

#include "emu/mma/mma_model.hpp"
#include "emu/numbers/round.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu {
namespace detail {

/// The exponent a term is aligned on: floor(log2 |x|), or the format's minimum exponent for a
/// subnormal (the significand is not renormalized).
ROUNDSCOPE_HD constexpr int alignment_exponent(const Format& f, const Unpacked& x) {
    const int e = x.e + bit_width(x.m) - 1;
    return e > emin(f) ? e : emin(f);
}

ROUNDSCOPE_HD constexpr std::uint32_t accumulator_nan(const Format& acc) {
    return static_cast<std::uint32_t>(magnitude_mask(acc));  // 0x7FFFFFFF or 0x7FFF: NVIDIA's canonical NaN
}

ROUNDSCOPE_HD constexpr std::uint32_t accumulator_inf(const Format& acc, bool negative) {
    return static_cast<std::uint32_t>((exponent_field_max(acc) << acc.man_bits) | (negative ? sign_mask(acc) : 0));
}

/// Rounds the exact block sum (-1)^negative * magnitude * 2^q into the accumulator format.
/// Every zero result is +0, also a negative sum that rounds to zero: MMA-Sim's hardware-validated
/// model says so; the H100 golden vectors hold no such sum (tests/emu/mma/test_mma_special.cpp).
ROUNDSCOPE_HD constexpr std::uint32_t round_block_sum(const MmaModel& m, bool negative, std::uint64_t magnitude,
                                                      int q) {
    if (magnitude == 0) return 0;  // an exact zero sum is +0, whatever the signs of the terms
    Unpacked x;
    x.cls = ValueClass::finite;
    x.negative = negative;
    x.m = magnitude;
    x.e = q;
    CastOptions options;
    if (m.rounding == BlockRounding::rne_f16) {
        options.mode = RoundingMode::nearest_even;  // overflow gives Inf
        const auto bits = static_cast<std::uint32_t>(round_to_format(f16, x, options));
        return bits == 0x8000 ? 0 : bits;
    }
    // Toward zero, but a sum of 2^128 or more is Inf, not the largest finite number.
    if (q + bit_width(magnitude) - 1 >= 128) return accumulator_inf(f32, negative);
    options.mode = RoundingMode::toward_zero;
    auto bits = static_cast<std::uint32_t>(round_to_format(f32, x, options));
    // e8m13 keeps 13 fraction bits: truncating twice is truncating once.
    if (m.rounding == BlockRounding::rz_e8m13) bits &= ~std::uint32_t{0x3FF};
    return bits == 0x80000000u ? 0 : bits;
}

/// float32 + float32 rounded to nearest even, NaN canonical: the FADD that adds C after the
/// blocks (AccumulatorEntry::added_after). The double sum is rounded twice, which is innocuous
/// for addition because 53 >= 2 * 24 + 2 (Figueroa, "When is double rounding innocuous?", 1995).
ROUNDSCOPE_HD inline std::uint32_t add_f32_rn(std::uint32_t x, std::uint32_t y) {
    const double sum = static_cast<double>(float_from_bits(x)) + static_cast<double>(float_from_bits(y));
    if (sum != sum) return 0x7FFFFFFF;
    return bits_of(static_cast<float>(sum));
}

}  // namespace detail

/// One truncated fused dot-product-add: c + sum of a[t] * b[t] for t < count (count <= 64),
/// a and b in the model's input formats, c and the result in its accumulator format.
ROUNDSCOPE_HD constexpr std::uint32_t fused_dot_add(const MmaModel& m, const std::uint32_t* a, const std::uint32_t* b,
                                                    int count, std::uint32_t c) {
    using namespace detail;
    const std::uint32_t dropped = ~((std::uint32_t{1} << m.dropped_input_bits) - 1);
    const Unpacked uc = unpack(m.accumulator, c);

    // Special values decide the result alone: NaN anywhere, Inf * 0, or Infs of both signs give
    // the canonical NaN; otherwise an Inf term gives that Inf.
    bool nan = uc.cls == ValueClass::nan, pos_inf = false, neg_inf = false;
    if (uc.cls == ValueClass::inf) (uc.negative ? neg_inf : pos_inf) = true;
    Unpacked ua[64], ub[64];
    for (int t = 0; t < count; ++t) {
        ua[t] = unpack(m.a, a[t] & dropped);
        ub[t] = unpack(m.b, b[t] & dropped);
        const bool inf_a = ua[t].cls == ValueClass::inf, inf_b = ub[t].cls == ValueClass::inf;
        if (ua[t].cls == ValueClass::nan || ub[t].cls == ValueClass::nan) nan = true;
        if (inf_a || inf_b) {
            if (ua[t].cls == ValueClass::zero || ub[t].cls == ValueClass::zero) nan = true;
            (ua[t].negative != ub[t].negative ? neg_inf : pos_inf) = true;
        }
    }
    if (nan || (pos_inf && neg_inf)) return accumulator_nan(m.accumulator);
    if (pos_inf || neg_inf) return accumulator_inf(m.accumulator, neg_inf);

    // Emax over all terms, a zero term counting as e_zero.
    int e_max = uc.cls == ValueClass::zero ? m.zero_exponent : alignment_exponent(m.accumulator, uc);
    for (int t = 0; t < count; ++t) {
        const bool zero = ua[t].cls == ValueClass::zero || ub[t].cls == ValueClass::zero;
        const int e = zero ? m.zero_exponent : alignment_exponent(m.a, ua[t]) + alignment_exponent(m.b, ub[t]);
        e_max = e > e_max ? e : e_max;
    }
    // Each term's magnitude truncated to a multiple of 2^(e_max - F), then added exactly.
    const int quantum = e_max - m.alignment_bits;
    auto truncated = [quantum](std::uint64_t magnitude, int e) -> std::int64_t {
        const int shift = e - quantum;  // a term is below 2^(F + 2) quanta, so a left shift fits
        return static_cast<std::int64_t>(shift >= 0 ? magnitude << shift : shift_right(magnitude, -shift));
    };
    std::int64_t sum = uc.cls == ValueClass::zero ? 0 : truncated(uc.m, uc.e) * (uc.negative ? -1 : 1);
    for (int t = 0; t < count; ++t) {
        if (ua[t].cls == ValueClass::zero || ub[t].cls == ValueClass::zero) continue;
        const std::int64_t term = truncated(ua[t].m * ub[t].m, ua[t].e + ub[t].e);
        sum += ua[t].negative != ub[t].negative ? -term : term;
    }
    const bool negative = sum < 0;
    return round_block_sum(m, negative, static_cast<std::uint64_t>(negative ? -sum : sum), quantum);
}

/// The block (0 or 1) product k of an instruction falls in under KOrder::pair_interleaved.
ROUNDSCOPE_HD constexpr int interleaved_block(int k) { return (k % 4) < 2 ? 0 : 1; }

/// D = C + sum over k < depth of a[k] * b[k * b_stride]: the instruction applied over `depth`
/// products in chunks of m.k, each chunk's blocks in the model's order. A last, partial chunk
/// behaves as if padded with zeros (a zero product never changes a result: the accumulator is
/// always a term and its exponent is never below e_zero).
ROUNDSCOPE_HD constexpr std::uint32_t mma_dot(const MmaModel& m, const std::uint32_t* a, const std::uint32_t* b,
                                              long b_stride, int depth, std::uint32_t c) {
    const bool c_first = m.c_entry == AccumulatorEntry::first_block;
    std::uint32_t d = c;
    std::uint32_t block_a[64], block_b[64];
    for (int k0 = 0; k0 < depth; k0 += m.k) {
        const int chunk = depth - k0 < m.k ? depth - k0 : m.k;
        std::uint32_t acc = c_first ? d : 0;
        if (m.k_order == KOrder::pair_interleaved) {
            for (int block = 0; block < 2; ++block) {
                int n = 0;
                for (int k = 0; k < chunk; ++k) {
                    if (interleaved_block(k) != block) continue;
                    block_a[n] = a[k0 + k];
                    block_b[n] = b[(k0 + k) * b_stride];
                    ++n;
                }
                acc = fused_dot_add(m, block_a, block_b, n, acc);
            }
        } else {
            for (int start = 0; start < chunk; start += m.block_length) {
                const int n = chunk - start < m.block_length ? chunk - start : m.block_length;
                for (int t = 0; t < n; ++t) {
                    block_a[t] = a[k0 + start + t];
                    block_b[t] = b[(k0 + start + t) * b_stride];
                }
                acc = fused_dot_add(m, block_a, block_b, n, acc);
            }
        }
        // The next instruction's C is this one's D.
        d = c_first ? acc : detail::add_f32_rn(acc, d);
    }
    return d;
}

}  // namespace roundscope::emu
