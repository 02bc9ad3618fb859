#pragma once
// The FP8 kernel's online softmax on S's accumulator fragments, as h100-fp8 runs it
// (FlashAttention-3's hopper/softmax.h): the BF16 kernel's maxima (../softmax.cuh), exp2's
// argument against the max less the max offset k (steps::exp2_max: P-bar in [0, 2^k]), and
// row_sum=lane-tile: each lane sums its keys of the tile in order, then l_t = fma(l_t, alpha,
// that). P is cast to E4M3 straight into the k32 A fragments of P V (config.cuh's permutation).
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/numbers/round.hpp"
#include "gpu/kernels/hopper/fp8/config.cuh"
#include "gpu/kernels/hopper/fp8/consumer_state.cuh"
#include "gpu/kernels/hopper/softmax.cuh"
#include "gpu/primitives/convert.hpp"

namespace roundscope::gpu::hopper::fp8 {

/// One tile's online softmax in place (the tile at key0): each row's maxima, its rescale factor
/// alpha (into `factor`), P-bar of each score and the lane's l. Masked as the BF16 kernel masks:
/// a key the row does not see is -inf, its P-bar +0, which adds nothing to the lane's sum.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg, bool Masked>
ROUNDSCOPE_DEVICE void softmax_tile(const ForwardParams& p, ConsumerState<D>& c, std::uint64_t key0,
                                    float (&factor)[2]) {
    namespace a = emu::f32_arith;
    namespace steps = emu::steps;
    constexpr int n = block_n<D>;
    const unsigned lane = threadIdx.x % 32;
    const steps::OnlineSoftmax& f = p.softmax;
    const std::uint64_t keys = p.n_kv - key0 < n ? p.n_kv - key0 : n;
    ROUNDSCOPE_UNROLL
    for (int r = 0; r < 2; ++r) {
        RowState& st = c.st[r];
        if constexpr (Masked) {
            const std::uint64_t visible = steps::visible_keys(c.rows[r], p.n_q, p.n_kv, p.causal);
            const int in_tile = static_cast<int>(visible <= key0 ? 0 : (visible - key0 < keys ? visible - key0 : keys));
            ROUNDSCOPE_UNROLL
            for (int q = 0; q < n / 4; ++q)  // key 8 (q / 2) + 2 (lane % 4) + q % 2
                if (8 * (q / 2) + 2 * static_cast<int>(lane % 4) + q % 2 >= in_tile)
                    c.s[4 * (q / 2) + 2 * r + q % 2] = steps::minus_infinity();
        }
        float raw = steps::minus_infinity();
        ROUNDSCOPE_UNROLL
        for (int q = 0; q < n / 4; ++q) raw = a::max(raw, c.s[4 * (q / 2) + 2 * r + q % 2]);
        raw = quad_max(raw);
        const steps::MaxStep next =
            steps::advance_max(st.m, st.m_raw, a::mul(raw, f.scale_log2), raw, f.rescale_arg, f.scale_log2, Exp2);
        factor[r] = next.factor;
        const float m_arg = steps::exp2_max(f, next.m, next.m_raw);
        float tile_sum = 0;
        ROUNDSCOPE_UNROLL
        for (int q = 0; q < n / 4; ++q) {  // the lane's keys in order, the first starting the sum
            float& x = c.s[4 * (q / 2) + 2 * r + q % 2];
            x = steps::p_bar(x, f.scale_log2, m_arg, Arg, Exp2);
            tile_sum = q == 0 ? x : a::add(tile_sum, x);
        }
        st.lane_sum = a::fma(st.lane_sum, factor[r], tile_sum);
        st.m = next.m, st.m_raw = next.m_raw;
    }
}

/// After the previous tile's P V has completed: O rescaled by the factors of the tile whose
/// softmax just ran, and that tile's P cast to E4M3 (steps::cast_p with p_scale 1, four by two
/// cvt.rn.satfinite.e4m3x2.f32) into the A fragments its P V reads: register r of step kk holds
/// row r % 2's keys 8 j + 2 (lane % 4) and + 1 for j = 4 kk + 2 (r / 2) and the next j.
template <int D>
ROUNDSCOPE_DEVICE void rescale_and_cast(ConsumerState<D>& c, const float (&factor)[2]) {
    namespace a = emu::f32_arith;
    ROUNDSCOPE_UNROLL
    for (int x = 0; x < D / 2; ++x) c.o[x] = a::mul(c.o[x], factor[x % 4 / 2]);
    ROUNDSCOPE_UNROLL
    for (int kk = 0; kk < block_n<D> / key_panel; ++kk) ROUNDSCOPE_UNROLL
    for (int r = 0; r < 4; ++r) {
        const int j = 4 * kk + 2 * (r / 2), e = 2 * (r % 2);
        c.p[4 * kk + r] =
            e4m3x4_rn_satfinite(c.s[4 * j + e], c.s[4 * j + e + 1], c.s[4 * (j + 1) + e], c.s[4 * (j + 1) + e + 1]);
    }
}

}  // namespace roundscope::gpu::hopper::fp8
