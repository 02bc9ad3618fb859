#pragma once
// The online softmax as a flash attention written in PyTorch runs it on BF16 tensors: Seed
// 000's released code (github.com/ucker/why-low-precision-training-fails, attention.py), a
// FlashAttention-2 in eager tensor ops, trained under torch.autocast(bfloat16) (train.py).
// Every tensor op rounds its result to the dtype it stores, which autocast chooses:
//   S = (q k^T) scale          einsum output in BF16, times the scale in float32, stored BF16
//   m_b = rowmax(S), m         BF16 (exact)
//   P-bar = exp(S - m)         the difference stored in BF16; exp is on autocast's float32 list
//   block sum                  float32 (sum is on the float32 list too)
//   P-bar V                    einsum: P-bar cast to BF16, output BF16
//   l = exp(m_old - m) l + sum float32 arithmetic, stored into the BF16 row sums
//   O = O exp(m_old - m) + P-bar V, then O / l:   each in float32, stored in the running format
// exp is float32's: here the double exp rounded to float32 (CUDA's expf is within 2 ulps of it).
// Host only: no kernel runs this softmax; attention_recipe.hpp calls it "online-torch".
#include <cmath>
#include <cstdint>
#include <vector>

#include "emu/attention/softmax/attention_steps.hpp"

namespace roundscope::emu::torch_eager {

/// A float32 result stored in a tensor of f (nearest even; overflow to Inf).
inline float stored(float x, const Format& f) { return static_cast<float>(rounded_value(static_cast<double>(x), f)); }

/// float32 exp.
inline float exp_f32(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }

/// What the recipe fixes: the softmax scale, the format S and the row max are stored in, the
/// row sum's (the same in the released code), Qiu & Yao's max adjustment (as their code does
/// it: a second score at or above the block max - 1e-3, both in BF16), and the P cast.
struct TorchSoftmax {
    float scale;
    const Format* storage;
    const Format* row_sum_storage;
    bool max_adjust;
    float max_adjust_beta;
    float p_scale;
    const Format* p_format;
    int lanes = 16;  // compiled-torch: float lanes of the CPU's vectors, which Inductor's sums follow
};

/// One row of one tile: s holds the n score products (float32 bits), the first `visible`
/// unmasked. As in the released code, a masked score is the format's most negative finite value
/// (it takes part in the block max and in the count of near maxima), a block's sum is at least
/// 1e-10, and tiles the causal mask hides wholly are computed too. The state's m is in natural
/// units (S), l as stored. Writes the cast P-bar and returns exp(m_old - m_new), which carries
/// the row's output to the new max.
inline float row_step(const TorchSoftmax& f, const std::uint32_t* s, int n, int visible, steps::OnlineRowState& st,
                      std::uint32_t* p_out, steps::ForwardCounts* counts, std::uint64_t key0,
                      steps::RowTies* ties = nullptr) {
    namespace a = f32_arith;
    const Format& bf = *f.storage;
    const auto masked = static_cast<float>(-decode(bf, max_finite_bits(bf)));
    std::vector<float> score(static_cast<std::size_t>(n), masked);
    float block_max = steps::minus_infinity();
    for (int j = 0; j < n; ++j) {
        if (j < visible) score[j] = stored(a::mul(stored(float_from_bits(s[j]), bf), f.scale), bf);
        block_max = a::max(block_max, score[j]);
    }
    int at_max = 0, near_max = 0;
    const float near = stored(a::sub(block_max, 1e-3f), bf);
    for (int j = 0; j < n; ++j) near_max += score[j] >= near, at_max += j < visible && score[j] == block_max;
    if (visible > 0 && block_max > st.true_max) st.true_max = block_max, st.true_max_count = 0;
    if (visible > 0 && block_max == st.true_max) st.true_max_count += static_cast<std::uint64_t>(at_max);
    if (f.max_adjust && near_max > 1)
        block_max = block_max > 0 ? stored(a::mul(block_max, f.max_adjust_beta), bf) : block_max < 0 ? 0.0f : block_max;
    // the running max starts at the most negative finite value too (-inf here: the same P-bar)
    const float m_old = st.m == steps::minus_infinity() ? masked : st.m;
    const float m_new = a::max(m_old, block_max);
    const float factor = exp_f32(stored(a::sub(m_old, m_new), bf));
    if (ties != nullptr) ties->rescale(factor);
    const steps::PCastConstants k(f.p_scale, *f.p_format);
    double sum = 0;  // float32 in any order (CUDA's reduction order is unspecified): the exact sum, rounded once
    for (int j = 0; j < n; ++j) {
        const float p = exp_f32(stored(a::sub(score[j], m_new), bf));
        sum += static_cast<double>(p);
        p_out[j] = steps::cast_p(p, f.p_scale, *f.p_format);
        if (counts != nullptr && j < visible)
            steps::count_p(p, f.p_scale, p_out[j], *f.p_format, key0 + static_cast<std::uint64_t>(j), *counts, k);
        if (ties != nullptr && j < visible) ties->add(p, p_out[j] == k.one);
    }
    st.l = stored(a::add(a::mul(factor, st.l), a::max(static_cast<float>(sum), 1e-10f)), *f.row_sum_storage);
    st.m = m_new;
    return factor;
}

}  // namespace roundscope::emu::torch_eager
