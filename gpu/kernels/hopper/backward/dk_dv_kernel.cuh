#pragma once
// The Hopper backward's dK/dV kernel: one thread block per 128 keys of one head, which holds K and
// V and walks the row blocks in order (grad_schedule=in-order), each streamed as Q and dO through
// the ring. Consumer warpgroup w owns keys 64 w .. 64 w + 63 and, per half of a row block:
//   S^T  = K Q^T and dP^T = V dO^T   (wgmma, both operands K-major; S^T equals S element for
//                                     element: the same exact products, summed in the same k16 steps)
//   P^T, dS^T                        (steps::backward_p from the row's LSE, dS = P (dP - delta))
//   dV += P^T dO, dK += dS^T Q       (P^T and dS^T from registers, dO and Q read MN-major)
// dK and dV stay in registers over the whole walk and are written once: no atomics, so the bits
// are the emulator's and the same on every run.
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

/// A consumer thread's share of its warpgroup's dK and dV, and its keys.
template <int D>
struct KeyState {
    std::uint64_t keys[2];  // its two accumulator rows' keys (lane / 4 and + 8 of its warp's 16)
    float dk[D / 2], dv[D / 2];
};

/// One half (64 rows from row h0) of a row block: S^T and dP^T, the gradients, then dV and dK.
template <int D>
ROUNDSCOPE_DEVICE void half_block(const BackwardParams& p, KeyState<D>& c, std::uint64_t head, std::uint64_t h0,
                                  int half, std::uint32_t k_rows, std::uint32_t v_rows, std::uint32_t q_tile,
                                  std::uint32_t do_tile) {
    constexpr std::uint32_t half_offset = half_rows * 128;  // 64 rows of a panel
    const unsigned lane = threadIdx.x % 32;
    float st[half_rows / 2], dpt[half_rows / 2];
    zero(st), zero(dpt);
    wgmma_fence();
    issue_k_major<half_rows, D>(st, k_rows, q_tile + half * half_offset);
    issue_k_major<half_rows, D>(dpt, v_rows, do_tile + half * half_offset);
    wgmma_commit_group();
    wgmma_wait_group<0>();
    std::uint32_t pt[half_rows / 4], dst[half_rows / 4];  // [2 j + r]: key r's rows 8 j + 2 (lane % 4), + 1
    ROUNDSCOPE_UNROLL
    for (int j = 0; j < half_rows / 8; ++j) {
        Gradient g[2][2];  // [key r][row e]
        ROUNDSCOPE_UNROLL
        for (int e = 0; e < 2; ++e) {
            const std::uint64_t row = h0 + 8 * static_cast<std::uint64_t>(j) + 2 * (lane % 4) + e;
            const bool real = row < p.n_q;
            const float lse2 = real ? p.lse2[head * p.n_q + row] : emu::steps::minus_infinity();
            const float delta = real ? p.delta[head * p.n_q + row] : 0.0f;
            const std::uint64_t visible = real ? emu::steps::visible_keys(row, p.n_q, p.n_kv, p.causal) : 0;
            ROUNDSCOPE_UNROLL
            for (int r = 0; r < 2; ++r)
                g[r][e] = gradient(p, st[4 * j + 2 * r + e], dpt[4 * j + 2 * r + e], c.keys[r] < visible, lse2, delta);
        }
        ROUNDSCOPE_UNROLL
        for (int r = 0; r < 2; ++r) {
            const CastPairs x = cast_pairs(g[r][0], g[r][1]);
            pt[2 * j + r] = x.p, dst[2 * j + r] = x.ds;
        }
    }
    wgmma_fence();
    issue_mn_major<D, half_rows / 16>(c.dv, pt, do_tile, half * half_rows / 16);
    issue_mn_major<D, half_rows / 16>(c.dk, dst, q_tile, half * half_rows / 16);
    wgmma_commit_group();
    wgmma_wait_group<0>();
}

/// dK (times the scale) and dV in BF16, a pair of adjacent columns at a time.
template <int D>
ROUNDSCOPE_DEVICE void store_dk_dv(const BackwardParams& p, const KeyState<D>& c, std::uint64_t head) {
    const int t = static_cast<int>(threadIdx.x % 128);
    ROUNDSCOPE_UNROLL
    for (int x = 0; x < D / 2; x += 2) {
        const std::uint64_t key = c.keys[x % 4 / 2];
        if (key >= p.n_kv) continue;
        const std::uint64_t at = (head * p.n_kv + key) * D + static_cast<std::uint64_t>(wgmma_col(t, x));
        const std::uint32_t dk = gradient_pair(c.dk[x], c.dk[x + 1], p.dk_dq_scale);
        const std::uint32_t dv = gradient_pair(c.dv[x], c.dv[x + 1], 1.0f);
        p.dk[at] = static_cast<std::uint16_t>(dk), p.dk[at + 1] = static_cast<std::uint16_t>(dk >> 16);
        p.dv[at] = static_cast<std::uint16_t>(dv), p.dv[at + 1] = static_cast<std::uint16_t>(dv >> 16);
    }
}

template <int D>
ROUNDSCOPE_DEVICE void consume_dk_dv(const BackwardParams& p, const StreamWalk& walk, BackwardStorage<D>& smem,
                                     std::uint64_t head) {
    using S = BackwardStorage<D>;
    const unsigned t = threadIdx.x % 128, w = threadIdx.x / 128, lane = t % 32;
    const std::uint32_t base = shared_address(&smem);
    const std::uint32_t k_rows = base + S::held_offset(0) + S::rows_offset(w);
    const std::uint32_t v_rows = base + S::held_offset(1) + S::rows_offset(w);
    KeyState<D> c;
    c.keys[0] = walk.held0 + 64 * w + 16 * (t / 32) + lane / 4, c.keys[1] = c.keys[0] + 8;
    zero(c.dk), zero(c.dv);
    mbarrier_wait_parity(&smem.held_full, 0);
    KvPipeline ring(smem.ring);
    RingSlot slot;
    for (std::uint64_t step = 0; step < walk.tiles; ++step) {
        if (walk.skipped(step)) continue;
        ring.wait(KvOperand::k, slot);
        ring.wait(KvOperand::v, slot);
        const std::uint32_t q_tile = base + S::streamed_offset(slot.stage, KvOperand::k);
        const std::uint32_t do_tile = base + S::streamed_offset(slot.stage, KvOperand::v);
        for (int half = 0; half < 2; ++half)
            half_block<D>(p, c, head, walk.start(step) + half * half_rows, half, k_rows, v_rows, q_tile, do_tile);
        ring.release(KvOperand::k, slot);
        ring.release(KvOperand::v, slot);
        slot = slot.next();
    }
    store_dk_dv<D>(p, c, head);
}

template <int D>
ROUNDSCOPE_KERNEL void ROUNDSCOPE_LAUNCH_BOUNDS(threads, 1) dk_dv_kernel(ROUNDSCOPE_GRID_CONSTANT BackwardParams p) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    (void)p;  // built for a GPU without wgmma and TMA: the host never launches it there
#else
    const std::uint64_t head = blockIdx.y, key0 = static_cast<std::uint64_t>(blockIdx.x) * block_n;
    const StreamWalk walk{(p.n_q + block_m - 1) / block_m, key0, p.n_q, p.n_kv, p.causal, true};
    const TmaMap* const held[2] = {&p.k_map, &p.v_map};
    const TmaMap* const streamed[2] = {&p.q_map, &p.do_map};
    run_block<D>(walk, held, streamed, head, [&](BackwardStorage<D>& smem) { consume_dk_dv<D>(p, walk, smem, head); });
#endif
}

}  // namespace roundscope::gpu::hopper::backward
