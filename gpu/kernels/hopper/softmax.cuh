#pragma once
// The online softmax on a consumer thread's fragments of S. A row's statistics are spread over
// the four lanes that hold its columns: its raw maximum is reduced by shuffles (a maximum in any
// order is the same value; only a zero's sign could differ, which no output reads:
// test_emu_exhaustive_max_zero_sign), the scaled maximum taken as RN(raw max x c) (rounding is
// monotone and c > 0, so it is the maximum of RN(s c)), and its sum kept per lane, as
// row_sum=quad-ffma states. The rules of the step (the maxima's update and alpha, P-bar, a lane's
// sum) are the emulator's own functions (emu/attention/softmax/attention_steps.hpp).
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/numbers/round.hpp"
#include "gpu/kernels/hopper/config.cuh"
#include "gpu/kernels/hopper/consumer_state.cuh"
#include "gpu/primitives/convert.hpp"
#include "gpu/primitives/warp.hpp"

namespace roundscope::gpu::hopper {

/// The largest of a row's value over the four lanes that hold its columns.
ROUNDSCOPE_DEVICE inline float quad_max(float x) {
    namespace a = emu::f32_arith;
    x = a::max(x, shfl_xor(x, 1));
    return a::max(x, shfl_xor(x, 2));
}

/// The online softmax of one tile's scores (the tile at key0), in place: each row's maxima, its
/// rescale factor alpha (into `factor`), P-bar = exp2 of each score and the lane's share of l.
/// Masked: the tile holds keys some row of the block does not see (a partial last tile, the
/// causal diagonal), whose scores are taken as -inf (P-bar = exp2(-inf) = +0, as the row step's
/// masked keys, without a branch around each exp2); otherwise every score is taken as it is,
/// without the compare and select.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg, bool Masked>
ROUNDSCOPE_DEVICE void softmax_tile(const ForwardParams& p, ConsumerState<D>& c, std::uint64_t key0,
                                    float (&factor)[2]) {
    namespace a = emu::f32_arith;
    namespace steps = emu::steps;
    const unsigned lane = threadIdx.x % 32;
    const steps::OnlineSoftmax& f = p.softmax;
    const std::uint64_t keys = p.n_kv - key0 < block_n ? p.n_kv - key0 : block_n;
    ROUNDSCOPE_UNROLL
    for (int r = 0; r < 2; ++r) {
        RowState& st = c.st[r];
        if constexpr (Masked) {
            const std::uint64_t visible = steps::visible_keys(c.rows[r], p.n_q, p.n_kv, p.causal);
            const int in_tile = static_cast<int>(visible <= key0 ? 0 : (visible - key0 < keys ? visible - key0 : keys));
            ROUNDSCOPE_UNROLL
            for (int q = 0; q < block_n / 4; ++q)  // key 8 (q / 2) + 2 (lane % 4) + q % 2
                if (8 * (q / 2) + 2 * static_cast<int>(lane % 4) + q % 2 >= in_tile)
                    c.s[4 * (q / 2) + 2 * r + q % 2] = steps::minus_infinity();
        }
        float raw = steps::minus_infinity();
        ROUNDSCOPE_UNROLL
        for (int q = 0; q < block_n / 4; ++q) raw = a::max(raw, c.s[4 * (q / 2) + 2 * r + q % 2]);
        raw = quad_max(raw);
        const steps::MaxStep next =
            steps::advance_max(st.m, st.m_raw, a::mul(raw, f.scale_log2), raw, f.rescale_arg, f.scale_log2, Exp2);
        factor[r] = next.factor;
        const float m_arg = steps::usable_max(next.m);  // max_offset=0 (the kernel's capabilities)
        ROUNDSCOPE_UNROLL
        for (int q = 0; q < block_n / 4; ++q) {
            float& x = c.s[4 * (q / 2) + 2 * r + q % 2];
            x = steps::p_bar(x, f.scale_log2, m_arg, Arg, Exp2);
            st.lane_sum = steps::quad_ffma_add(st.lane_sum, x, factor[r], q == 0);  // q = 0: the lane's first key
        }
        st.m = next.m, st.m_raw = next.m_raw;
    }
}

/// After the previous tile's P V has completed: O rescaled by the factors of the tile whose
/// softmax just ran, and that tile's P cast (steps::cast_p into BF16, a pair by one
/// cvt.rn.satfinite.bf16x2.f32) into the registers its P V reads. ScaledP: p_scale is not 1 (P-bar
/// times 1 is P-bar, NaN aside, which the cast makes its one NaN either way: no multiply then).
template <int D, bool ScaledP>
ROUNDSCOPE_DEVICE void rescale_and_cast(const ForwardParams& p, ConsumerState<D>& c, const float (&factor)[2]) {
    namespace a = emu::f32_arith;
    ROUNDSCOPE_UNROLL
    for (int x = 0; x < D / 2; ++x) c.o[x] = a::mul(c.o[x], factor[x % 4 / 2]);
    const float scale = p.softmax.p_scale;
    ROUNDSCOPE_UNROLL
    for (int q = 0; q < block_n / 4; ++q) {  // q = 2 j + r: row r's keys 8 j + 2 (lane % 4) and + 1
        const float lo = c.s[4 * (q / 2) + 2 * (q % 2)], hi = c.s[4 * (q / 2) + 2 * (q % 2) + 1];
        c.p[q] = ScaledP ? bf16x2_rn_satfinite(a::mul(lo, scale), a::mul(hi, scale)) : bf16x2_rn_satfinite(lo, hi);
    }
}

}  // namespace roundscope::gpu::hopper
