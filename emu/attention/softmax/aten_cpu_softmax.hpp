#pragma once
// The online softmax of ATen's CPU flash attention (FlashAttentionKernel.cpp, cpu_flash_attention,
// the AVX-512 build) on BF16 and FP16 inputs, one row of one KV block (block_n keys, ATen's
// kvSplitSize 512); on float32 inputs (P not cast) exp_u20 and vector_sum_one in their places:
//   s = S scale                 float32; with an additive mask fma(S, scale, mask) (the compiler
//                               contracts ATen's a * scale + b)
//   m' = max(m, rowmax s)       exact
//   P-bar = exp(s - m')         the difference in float32; fexp_u20 on the keys of the block's
//                               whole vectors of 16, the C library's exp (double) rounded to
//                               float on the rest
//   l' = fma(expf(m - m'), l, sum P-bar)   the sum as vector_sum forms it, then the rest in order
//   O' = O expf(m - m') + P V   P-bar cast to BF16; P V by the AMX GEMM (amx_gemm.hpp)
// and at the end O = RN(O RN(1 / l)), LSE = RN(m + logf(l)), an empty row's m and l taken as 0
// and 1 (math in aten_cpu_math.hpp). A row that sees no key of a block is left as it was.
#include <cstdint>
#include <vector>

#include "emu/attention/math/aten_cpu_math.hpp"
#include "emu/attention/softmax/attention_steps.hpp"

namespace roundscope::emu::aten_cpu {

/// One row of one KV block: s holds the block's n score products (float32 bits), the first
/// `visible` unmasked; mask, where not null, the n additive mask values (natural units, -inf
/// masks). Writes the cast P-bar and returns the factor that carries the row's O to the new max.
inline float row_step(float scale, const Format& p_format, const std::uint32_t* s, int n, int visible,
                      const float* mask, steps::OnlineRowState& st, std::uint32_t* p_out, steps::ForwardCounts* counts,
                      std::uint64_t key0, steps::RowTies* ties = nullptr) {
    namespace a = f32_arith;
    const auto count = static_cast<std::size_t>(n);
    std::vector<float> x(count, steps::minus_infinity()), p(count, 0.0f);
    float block_max = steps::minus_infinity();
    for (int j = 0; j < visible; ++j) {
        const float product = float_from_bits(s[j]);
        x[j] = mask == nullptr ? a::mul(product, scale) : a::fma(product, scale, mask[j]);
        block_max = std::isnan(x[j]) || x[j] > block_max ? x[j] : block_max;  // vec::maximum keeps a NaN
    }
    if (visible > 0 && block_max > st.true_max) st.true_max = block_max, st.true_max_count = 0;
    if (visible > 0 && block_max == st.true_max)
        for (int j = 0; j < visible; ++j) st.true_max_count += x[j] == block_max;
    const float m_new = st.m > block_max ? st.m : block_max;
    if (m_new == steps::minus_infinity()) {  // ATen fills P with zeros and keeps m, l and O
        for (int j = 0; j < n; ++j) p_out[j] = 0;
        return 1.0f;
    }
    const std::size_t vectors = count / 16;
    // P kept in float32 is ATen's float32 kernel, whose exp and sum differ from the BF16 and FP16 ones'
    const bool float_kernel = p_format == f32;
    for (std::size_t j = 0; j < count; ++j) {
        const float d = a::sub(x[j], m_new);
        p[j] = j >= vectors * 16 ? libm_exp_rounded(d) : float_kernel ? exp_u20(d) : fexp_u20(d);
    }
    float sum = float_kernel ? vector_sum_one(p.data(), vectors) : vector_sum(p.data(), vectors);
    for (std::size_t j = vectors * 16; j < count; ++j) sum = a::add(sum, p[j]);
    const float factor = libm_expf(a::sub(st.m, m_new));
    if (ties != nullptr) ties->rescale(factor);
    st.l = a::fma(factor, st.l, sum);
    st.m = m_new;
    const steps::PCastConstants k(1.0f, p_format);
    for (int j = 0; j < n; ++j) {
        p_out[j] = steps::cast_p(p[j], 1.0f, p_format);
        if (j >= visible || x[j] == steps::minus_infinity()) continue;
        if (counts != nullptr)
            steps::count_p(p[j], 1.0f, p_out[j], p_format, key0 + static_cast<std::uint64_t>(j), *counts, k);
        if (ties != nullptr) ties->add(p[j], p_out[j] == k.one);
    }
    return factor;
}

/// ATen's end of a row: O = RN(acc RN(1 / l)) and LSE = RN(m + logf(l)), with m = 0 for a row that
/// saw no key and l = 1 where the sum is 0.
struct RowEnd {
    float reciprocal, lse;
};
inline RowEnd row_end(const steps::OnlineRowState& st) {
    namespace a = f32_arith;
    const float m = st.m == steps::minus_infinity() ? 0.0f : st.m;
    const float l = st.l == 0.0f ? 1.0f : st.l;
    return {a::div(1.0f, l), a::add(m, libm_logf(l))};
}

}  // namespace roundscope::emu::aten_cpu
