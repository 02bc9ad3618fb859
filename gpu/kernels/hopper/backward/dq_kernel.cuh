#pragma once
// The Hopper backward's dQ kernel: one thread block per 128 query rows of one head, which holds Q
// and dO and walks the key tiles in order, each streamed as K and V through the ring. Consumer
// warpgroup w owns rows 64 w .. 64 w + 63 and, per key tile:
//   S = Q K^T and dP = dO V^T   (wgmma, both operands K-major)
//   dS                           (recomputed: the dK/dV kernel's dS bit for bit, from the same S,
//                                 dP, LSE and delta by the same rule; nothing goes through memory)
//   dQ += dS K                   (dS from registers, K read MN-major)
// dQ stays in registers over the walk and is written once, times the scale: where FlashAttention's
// backward adds dQ with atomics in whatever order the blocks finish, this sum has one order.
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "gpu/kernels/hopper/backward/block.cuh"
#include "gpu/kernels/hopper/backward/config.cuh"
#include "gpu/kernels/hopper/backward/gradients.cuh"
#include "gpu/kernels/hopper/backward/shared_storage.cuh"
#include "gpu/kernels/hopper/backward/stream_walk.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"
#include "gpu/primitives/sync.hpp"
#include "gpu/primitives/warp.hpp"
#include "gpu/primitives/wgmma.hpp"

namespace roundscope::gpu::hopper::backward {

/// A consumer thread's two rows, their LSE and delta, and its share of dQ.
template <int D>
struct RowGradState {
    std::uint64_t rows[2];
    float lse2[2], delta[2];
    float dq[D / 2];
};

/// One key tile (from key0): S and dP, dS, then dQ += dS K.
template <int D>
ROUNDSCOPE_DEVICE void key_tile(const BackwardParams& p, RowGradState<D>& c, std::uint64_t key0, std::uint32_t q_rows,
                                std::uint32_t do_rows, std::uint32_t k_tile, std::uint32_t v_tile) {
    const unsigned lane = threadIdx.x % 32;
    float s[block_n / 2], dp[block_n / 2];
    zero(s), zero(dp);
    wgmma_fence();
    issue_k_major<block_n, D>(s, q_rows, k_tile);
    issue_k_major<block_n, D>(dp, do_rows, v_tile);
    wgmma_commit_group();
    wgmma_wait_group<0>();
    std::uint64_t visible[2];
    ROUNDSCOPE_UNROLL
    for (int r = 0; r < 2; ++r)
        visible[r] = c.rows[r] < p.n_q ? emu::steps::visible_keys(c.rows[r], p.n_q, p.n_kv, p.causal) : 0;
    std::uint32_t ds[block_n / 4];  // [2 j + r]: row r's keys 8 j + 2 (lane % 4), + 1
    ROUNDSCOPE_UNROLL
    for (int j = 0; j < block_n / 8; ++j) {
        ROUNDSCOPE_UNROLL
        for (int r = 0; r < 2; ++r) {
            const std::uint64_t key = key0 + 8 * static_cast<std::uint64_t>(j) + 2 * (lane % 4);
            const int x = 4 * j + 2 * r;
            const Gradient lo = gradient(p, s[x], dp[x], key < visible[r], c.lse2[r], c.delta[r]);
            const Gradient hi = gradient(p, s[x + 1], dp[x + 1], key + 1 < visible[r], c.lse2[r], c.delta[r]);
            ds[2 * j + r] = cast_pairs(lo, hi).ds;
        }
    }
    wgmma_fence();
    issue_mn_major<D, block_n / 16>(c.dq, ds, k_tile, 0);
    wgmma_commit_group();
    wgmma_wait_group<0>();
}

template <int D>
ROUNDSCOPE_DEVICE void consume_dq(const BackwardParams& p, const StreamWalk& walk, BackwardStorage<D>& smem,
                                  std::uint64_t head) {
    using S = BackwardStorage<D>;
    const unsigned t = threadIdx.x % 128, w = threadIdx.x / 128, lane = t % 32;
    const std::uint32_t base = shared_address(&smem);
    const std::uint32_t q_rows = base + S::held_offset(0) + S::rows_offset(w);
    const std::uint32_t do_rows = base + S::held_offset(1) + S::rows_offset(w);
    RowGradState<D> c;
    c.rows[0] = walk.held0 + 64 * w + 16 * (t / 32) + lane / 4, c.rows[1] = c.rows[0] + 8;
    for (int r = 0; r < 2; ++r) {
        const bool real = c.rows[r] < p.n_q;
        c.lse2[r] = real ? p.lse2[head * p.n_q + c.rows[r]] : emu::steps::minus_infinity();
        c.delta[r] = real ? p.delta[head * p.n_q + c.rows[r]] : 0.0f;
    }
    zero(c.dq);
    mbarrier_wait_parity(&smem.held_full, 0);
    KvPipeline ring(smem.ring);
    RingSlot slot;
    for (std::uint64_t step = 0; step < walk.tiles; ++step) {
        if (walk.skipped(step)) continue;
        ring.wait(KvOperand::k, slot);
        ring.wait(KvOperand::v, slot);
        key_tile<D>(p, c, walk.start(step), q_rows, do_rows, base + S::streamed_offset(slot.stage, KvOperand::k),
                    base + S::streamed_offset(slot.stage, KvOperand::v));
        ring.release(KvOperand::k, slot);
        ring.release(KvOperand::v, slot);
        slot = slot.next();
    }
    ROUNDSCOPE_UNROLL
    for (int x = 0; x < D / 2; x += 2) {
        const std::uint64_t row = c.rows[x % 4 / 2];
        if (row >= p.n_q) continue;
        const std::uint64_t at =
            (head * p.n_q + row) * D + static_cast<std::uint64_t>(wgmma_col(static_cast<int>(t), x));
        const std::uint32_t dq = gradient_pair(c.dq[x], c.dq[x + 1], p.dk_dq_scale);
        p.dq[at] = static_cast<std::uint16_t>(dq), p.dq[at + 1] = static_cast<std::uint16_t>(dq >> 16);
    }
}

template <int D>
ROUNDSCOPE_KERNEL void ROUNDSCOPE_LAUNCH_BOUNDS(threads, 1) dq_kernel(ROUNDSCOPE_GRID_CONSTANT BackwardParams p) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    (void)p;  // built for a GPU without wgmma and TMA: the host never launches it there
#else
    const std::uint64_t head = blockIdx.y, row0 = static_cast<std::uint64_t>(blockIdx.x) * block_m;
    const StreamWalk walk{(p.n_kv + block_n - 1) / block_n, row0, p.n_q, p.n_kv, p.causal, false};
    const TmaMap* const held[2] = {&p.q_map, &p.do_map};
    const TmaMap* const streamed[2] = {&p.k_map, &p.v_map};
    run_block<D>(walk, held, streamed, head, [&](BackwardStorage<D>& smem) { consume_dq<D>(p, walk, smem, head); });
#endif
}

}  // namespace roundscope::gpu::hopper::backward
