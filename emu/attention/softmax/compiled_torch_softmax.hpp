#pragma once
// The released flash attention of torch_softmax.hpp as torch.compile runs it (train.py's
// compile = True), on a CPU with AVX-512: Inductor fuses one bucket's element-wise chain into
// two loops and keeps each intermediate in float32, storing only what leaves the fused kernel
// (the row max, P-bar cast for P-bar V, the row sum) in its graph dtype. So, unlike eager:
//   S scale                    float32, not stored in BF16
//   m = rowmax, stored BF16    the max adjustment's threshold m - RN_bf16(1e-3) in float32, its
//                              2m (beta m) in float32
//   P-bar = exp(S scale - m)   the difference in float32; exp is SLEEF's (inductor_cpu_math.hpp)
//   l = max(rowsum P-bar, 1e-10) the 16-lane float32 sum, never stored in BF16
//   O = (P-bar V) / l          P-bar V from the BF16 einsum, the division in float32, O in BF16
//   LSE = log l + m            SLEEF's log, float32
// One KV bucket only (the released code's buckets are 512 keys; its loop over buckets is not
// modelled): flash_context refuses more keys than block_n. Host only; "compiled-torch".
// The backward (the released code's, which only runs compiled): P = exp(S scale - LSE) from the
// BF16 score product, dP the BF16 einsum, dS = P scale (dP - delta) in float32, cast to BF16
// for dQ = dS K and dK = dS^T Q (the scale inside dS, none after), P cast for dV = P^T dO.
#include <cstdint>
#include <vector>

#include "emu/attention/math/inductor_cpu_math.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/attention/softmax/torch_softmax.hpp"

namespace roundscope::emu::torch_compiled {

/// One row of the single KV tile (n keys, the first `visible` unmasked; a masked score is the
/// BF16 format's most negative finite value, as in the released code). Writes the cast P-bar
/// and sets the state's m and l; returns 0, the factor that carries nothing from before.
inline float row_step(const torch_eager::TorchSoftmax& f, const std::uint32_t* s, int n, int visible,
                      steps::OnlineRowState& st, std::uint32_t* p_out, steps::ForwardCounts* counts, std::uint64_t key0,
                      steps::RowTies* ties = nullptr) {
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
    if (visible > 0) st.true_max = row_max, st.true_max_count = static_cast<std::uint64_t>(at_max);
    float m = m_stored;
    if (f.max_adjust && near_max > 1) m = m > 0 ? a::mul(m, f.max_adjust_beta) : m < 0 ? 0.0f : m;
    m = a::max(m, masked);
    const steps::PCastConstants k(f.p_scale, *f.p_format);
    for (int j = 0; j < n; ++j) {
        p[j] = inductor::expf(a::sub(x[j], m));
        p_out[j] = steps::cast_p(p[j], f.p_scale, *f.p_format);
        if (counts != nullptr && j < visible)
            steps::count_p(p[j], f.p_scale, p_out[j], *f.p_format, key0 + static_cast<std::uint64_t>(j), *counts, k);
        if (ties != nullptr && j < visible) ties->add(p[j], p_out[j] == k.one);
    }
    const float sum = inductor::lane_sum(p.data(), p.size());
    st.l = sum != sum ? sum : a::max(sum, 1e-10f);  // clamp(min=1e-10), NaN kept
    st.m = m;
    return 0.0f;
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
