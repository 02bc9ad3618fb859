#pragma once
// A consumer warpgroup's epilogue: l joined from the four lanes (offset 2, then 1), O scaled and
// cast a pair at a time, staged in the warpgroup's rows of Q (no longer read) and stored by TMA;
// the LSE by each row's lane 0.
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/numbers/round.hpp"
#include "gpu/kernels/hopper/config.cuh"
#include "gpu/kernels/hopper/consumer_state.cuh"
#include "gpu/kernels/hopper/shared_storage.cuh"
#include "gpu/primitives/convert.hpp"
#include "gpu/primitives/sync.hpp"
#include "gpu/primitives/tma.hpp"
#include "gpu/primitives/warp.hpp"
#include "gpu/primitives/wgmma.hpp"

namespace roundscope::gpu::hopper {

template <int D>
ROUNDSCOPE_DEVICE void epilogue(const ForwardParams& p, const ConsumerState<D>& c, SharedStorage<D>& smem,
                                std::uint64_t row0, std::uint64_t head) {
    namespace a = emu::f32_arith;
    namespace steps = emu::steps;
    const unsigned t = threadIdx.x % 128, w = threadIdx.x / 128, lane = t % 32;
    float l[2];
    for (int r = 0; r < 2; ++r) {
        const float x = a::add(c.st[r].lane_sum, shfl_xor(c.st[r].lane_sum, 2));
        l[r] = a::add(x, shfl_xor(x, 1));
    }
    std::byte* staging = smem.q + SharedStorage<D>::q_rows_offset(w);
    // o[x] and o[x + 1] (x even) are one row's adjacent columns: one cvt.rn.satfinite.bf16x2.f32
    ROUNDSCOPE_UNROLL
    for (int x = 0; x < D / 2; x += 2) {
        const int r = x % 4 / 2;
        const float factor = steps::output_factor(l[r], p.softmax.p_scale);
        const float out[2] = {a::mul(c.o[x], factor), a::mul(c.o[x + 1], factor)};
        const std::uint32_t pair = bf16x2_rn_satfinite(out[0], out[1]);
        const auto row = static_cast<unsigned>(wgmma_row(static_cast<int>(t), x));
        const auto col = static_cast<unsigned>(wgmma_col(static_cast<int>(t), x));
        // an even column: the pair stays within its 16-byte chunk of the swizzle
        store_shared_u32(
            staging + col / panel_cols * panel_bytes + swizzled(row * 128 + col % panel_cols * 2, Swizzle::b128), pair);
        if (p.o_f32 != nullptr && c.rows[r] < p.n_q)
            for (int e = 0; e < 2; ++e) p.o_f32[(head * p.n_q + c.rows[r]) * D + col + e] = out[e];
    }
    fence_async_shared();  // the staged O is the copy engine's to read
    named_barrier_sync(NamedBarrier::epilogue(w), 128);
    if (t == 0) {
        for (int k = 0; k < SharedStorage<D>::panels; ++k)
            tma_store(&p.o_map, staging + k * panel_bytes, k * panel_cols, static_cast<std::int32_t>(row0 + 64 * w),
                      static_cast<std::int32_t>(head));
        tma_store_commit();
        tma_store_wait_read<0>();
    }
    if (lane % 4 == 0)
        for (int r = 0; r < 2; ++r)
            if (c.rows[r] < p.n_q) {
                const float l2 = steps::lse_log2(c.st[r].m, l[r]);
                p.lse2[head * p.n_q + c.rows[r]] = l2;
                p.lse[head * p.n_q + c.rows[r]] = a::mul(l2, steps::ln2);
            }
}

}  // namespace roundscope::gpu::hopper
