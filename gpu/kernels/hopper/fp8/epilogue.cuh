#pragma once
// An FP8 consumer warpgroup's epilogue, FlashAttention-3's (Epilogue::fa3): l joined from the four
// lanes (offset 2, then 1), O = RN(acc rcp.approx.ftz(l)) (0 for a row without keys) cast a pair
// at a time to BF16 and stored by each thread (Q's tile, half the size of a BF16 O, cannot stage
// it), and the LSE from l 2^-k (the max offset taken out), fma(m_raw, RN(c RN(ln 2)),
// RN(lg2.approx.ftz(l 2^-k) RN(ln 2))), by each row's lane 0.
#include <cstdint>

#include "emu/attention/math/softmax_choices.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/numbers/round.hpp"
#include "gpu/kernels/hopper/fp8/config.cuh"
#include "gpu/kernels/hopper/fp8/consumer_state.cuh"
#include "gpu/primitives/convert.hpp"
#include "gpu/primitives/warp.hpp"
#include "gpu/primitives/wgmma.hpp"

namespace roundscope::gpu::hopper::fp8 {

template <int D>
ROUNDSCOPE_DEVICE void epilogue(const ForwardParams& p, const ConsumerState<D>& c, std::uint64_t head) {
    namespace a = emu::f32_arith;
    namespace steps = emu::steps;
    const unsigned t = threadIdx.x % 128, lane = t % 32;
    float l[2], factor[2];
    bool empty[2];
    for (int r = 0; r < 2; ++r) {
        const float x = a::add(c.st[r].lane_sum, shfl_xor(c.st[r].lane_sum, 2));
        l[r] = a::add(x, shfl_xor(x, 1));
        empty[r] = l[r] == 0.0f || l[r] != l[r];
        factor[r] = empty[r] ? 0.0f : emu::mufu_rcp_ftz(l[r]);
    }
    // o[x] and o[x + 1] (x even) are one row's adjacent columns: one cvt.rn.satfinite.bf16x2.f32
    ROUNDSCOPE_UNROLL
    for (int x = 0; x < D / 2; x += 2) {
        const int r = x % 4 / 2;
        if (c.rows[r] >= p.n_q) continue;
        const float out[2] = {a::mul(c.o[x], factor[r]), a::mul(c.o[x + 1], factor[r])};
        const auto col = static_cast<std::uint64_t>(wgmma_col(static_cast<int>(t), x));
        const std::uint64_t at = (head * p.n_q + c.rows[r]) * D + col;
        *reinterpret_cast<std::uint32_t*>(p.o + at) = bf16x2_rn_satfinite(out[0], out[1]);
        if (p.o_f32 != nullptr)
            for (int e = 0; e < 2; ++e) p.o_f32[at + e] = out[e];
    }
    if (lane % 4 != 0) return;
    for (int r = 0; r < 2; ++r) {
        if (c.rows[r] >= p.n_q) continue;
        const float log_l =
            a::mul(emu::detail::mufu_lg2_ftz(steps::offset_free_sum(l[r], p.softmax.max_offset)), steps::ln2);
        const float lse =
            empty[r] ? steps::minus_infinity() : a::fma(c.st[r].m_raw, a::mul(p.softmax.scale_log2, steps::ln2), log_l);
        p.lse[head * p.n_q + c.rows[r]] = lse;
        p.lse2[head * p.n_q + c.rows[r]] = a::mul(lse, steps::log2e);
    }
}

}  // namespace roundscope::gpu::hopper::fp8
