#pragma once
// The released flash attention of torch_softmax.hpp as torch.compile runs it (train.py's
// compile = True), on a CPU with AVX-512 (or AVX2: cpu_vector): Inductor fuses the element-wise
// chain of every bucket and keeps each intermediate in float32, storing only what leaves a fused
// kernel in its graph dtype. So, unlike eager, per KV bucket:
//   S scale                    float32, not stored in BF16
//   m_b = rowmax, stored BF16  the max adjustment's threshold m_b - RN_bf16(1e-3) in float32, its
//                              2 m_b (beta m_b) in float32; m = max(m_b, m_old), a BF16 value
//   P-bar = exp(S scale - m)   the difference in float32; exp is SLEEF's (inductor_cpu_math.hpp)
//   f = exp(m_old - m)         the same exp, from the running max (the masked value at first)
//   l = f l + max(rowsum P-bar, 1e-10)  a float32 sum in the vector's lanes, l carried in float32
//   O = O f + P-bar V          P-bar V from the BF16 einsum (o_accumulator), O carried in float32
// and at the end O / l' in float32, stored BF16, and LSE = log l + m (SLEEF's log, float32).
// l' is where the fusion lottery shows: the row sums live in one BF16 buffer that the released
// code updates in place, and Inductor reloads it from memory for the division in some row blocks
// and not in others (division_form below, read off torch 2.15's generated code and measured).
// The backward (the released code's, which only runs compiled): P = exp(S scale - LSE) from the
// BF16 score product, dP the BF16 einsum, dS = P scale (dP - delta) in float32, cast to BF16 for
// dQ = dS K and dK = dS^T Q (the scale inside dS, none after), P cast for dV = P^T dO; each
// bucket's einsum (BF16) added to dQ, dK and dV carried in float32 (flash_backward.cpp's
// accumulate), which are stored in BF16 at the end.
#include <cstdint>
#include <vector>

#include "emu/attention/math/inductor_cpu_math.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/attention/softmax/torch_softmax.hpp"

namespace roundscope::emu::torch_compiled {

/// Where O's division reads the row sum l from, per row block: Inductor's fusion either carries l
/// in float32 to the division (never), reloads the BF16 row sums after the last bucket (last), or
/// reloads them after the last but one bucket and recomputes the last update from there
/// (before-last: l' = f RN(l) + the last block sum). The LSE takes l in float32 in every case.
enum class Division { never, last, before_last };

/// The form Inductor (torch 2.15, buckets of 512 queries and keys, as many row blocks as KV
/// buckets) gives row block `row_block` of a forward over `buckets` KV buckets, read off its
/// generated code at N = 1024 and matched bit for bit at N = 1000 to 2560 (causal or not, with
/// and without the max adjustment, D 32 to 128: tests/peer/test_compiled_torch_buckets.py). No
/// rule generates the table; it is what the scheduler did. Known for one to five buckets;
/// flash_context refuses more.
inline constexpr std::uint64_t max_measured_buckets = 5;
inline Division division_form(std::uint64_t buckets, std::uint64_t row_block) {
    switch (buckets) {
        case 1:
            return Division::never;
        case 2:
            return row_block == 0 ? Division::never : Division::before_last;
        case 4:
            return Division::before_last;
        default:
            return row_block % 2 == 1 ? Division::before_last : Division::last;  // 3 and 5
    }
}

/// One row of one KV bucket (n keys, the first `visible` unmasked; a masked score is the BF16
/// format's most negative finite value, as in the released code). Writes the cast P-bar, updates
/// the state's m and l (float32) and `l_reloaded` (the update from the BF16-stored l, which
/// Division::before_last divides by); returns f = exp(m_old - m), which carries the row's O.
inline float row_step(const torch_eager::TorchSoftmax& f, const std::uint32_t* s, int n, int visible,
                      steps::OnlineRowState& st, float& l_reloaded, std::uint32_t* p_out, steps::ForwardCounts* counts,
                      std::uint64_t key0, steps::RowTies* ties = nullptr) {
    namespace a = f32_arith;
    using torch_eager::stored;
    const Format& bf = *f.storage;
    const auto masked = static_cast<float>(-decode(bf, max_finite_bits(bf)));
    std::vector<float> x(static_cast<std::size_t>(n), masked), p(static_cast<std::size_t>(n));
    float row_max = steps::minus_infinity();
    for (int j = 0; j < n; ++j) {
        if (j < visible) x[j] = a::mul(stored(float_from_bits(s[j]), bf), f.scale);
        row_max = a::max(row_max, x[j]);
    }
    const float m_stored = stored(row_max, bf);
    const float near = a::sub(m_stored, stored(1e-3f, bf));
    int at_max = 0, near_max = 0;
    for (int j = 0; j < n; ++j) near_max += x[j] >= near, at_max += j < visible && x[j] == row_max;
    if (visible > 0 && row_max > st.true_max) st.true_max = row_max, st.true_max_count = 0;
    if (visible > 0 && row_max == st.true_max) st.true_max_count += static_cast<std::uint64_t>(at_max);
    float block_max = m_stored;
    if (f.max_adjust && near_max > 1)
        block_max = block_max > 0 ? a::mul(block_max, f.max_adjust_beta) : block_max < 0 ? 0.0f : block_max;
    // the running max starts at the most negative finite value (the released code's row_maxes)
    const float m_old = st.m == steps::minus_infinity() ? masked : st.m;
    const float m = a::max(block_max, m_old);
    const float factor = inductor::expf(a::sub(m_old, m));
    if (ties != nullptr) ties->rescale(factor);
    const steps::PCastConstants k(f.p_scale, *f.p_format);
    for (int j = 0; j < n; ++j) {
        p[j] = inductor::expf(a::sub(x[j], m));
        p_out[j] = steps::cast_p(p[j], f.p_scale, *f.p_format);
        if (counts != nullptr && j < visible)
            steps::count_p(p[j], f.p_scale, p_out[j], *f.p_format, key0 + static_cast<std::uint64_t>(j), *counts, k);
        if (ties != nullptr && j < visible) ties->add(p[j], p_out[j] == k.one);
    }
    const float sum = inductor::lane_sum(p.data(), p.size(), f.lanes, f.lanes);
    const float block_sum = sum != sum ? sum : a::max(sum, 1e-10f);  // clamp(min=1e-10), NaN kept
    l_reloaded = a::add(a::mul(factor, stored(st.l, *f.row_sum_storage)), block_sum);
    st.l = a::add(a::mul(factor, st.l), block_sum);
    st.m = m;
    return factor;
}

/// The row sum O's division reads under `form` (l_reloaded: the last row_step's).
inline float division_sum(Division form, const torch_eager::TorchSoftmax& f, float l, float l_reloaded) {
    switch (form) {
        case Division::never:
            return l;
        case Division::last:
            return torch_eager::stored(l, *f.row_sum_storage);
        case Division::before_last:
            return l_reloaded;
    }
    return l;
}

/// One element of a backward tile: s the score product and dp the dP product (float32 bits,
/// both stored in BF16 by their einsums), lse the row's natural LSE; P and dS cast to g.
inline steps::BackwardElement backward_element(std::uint32_t s, std::uint32_t dp, bool visible, float lse, float delta,
                                               float scale, const Format& g) {
    namespace a = f32_arith;
    using torch_eager::stored;
    const float p = visible ? inductor::expf(a::sub(a::mul(stored(float_from_bits(s), bf16), scale), lse)) : 0.0f;
    const float ds = a::mul(a::mul(p, scale), a::sub(stored(float_from_bits(dp), bf16), delta));
    return {p, steps::saturating_cast(p, g), steps::saturating_cast(ds, g)};
}

}  // namespace roundscope::emu::torch_compiled
