#pragma once
// The FlashAttention-3-style BF16 forward kernel for Hopper (sm_90a), whose arithmetic is the
// recipe h100-bf16 (emu/attention/recipe/recipe_presets.cpp): one thread block per 128 query rows
// of one head. Its parts, in gpu/kernels/hopper/:
//   config.cuh          tiles, threads and their registers, the ring's depth, named barriers
//   shared_storage.cuh  the block's shared memory as one struct: Q, the K/V ring, the barriers
//   kv_pipeline.cuh     the K/V ring: a slot's stage and phase, acquire/commit, wait/release
//   tile_walk.cuh       the KV tiles in the recipe's order, those no row sees skipped
//   producer.cuh        a producer warpgroup (24 registers a thread after setmaxnreg), one of
//                       whose threads issues the TMA loads of Q once and of K and V into the ring
//   gemms.cuh           S = Q K^T (both operands in shared memory) and O += P V (P from
//                       registers, V read MN-major) by wgmma, a group each
//   softmax.cuh         the online softmax on S's accumulator fragments, and P's cast
//   mainloop.cuh        each of two consumer warpgroups (240 registers) walks the tiles,
//                       pipelined as FlashAttention-3's (S of the next tile beside P V of this one)
//   epilogue.cuh        O through shared memory by a TMA store, and the LSE
//
// Bit for bit the emulator's h100-bf16: the same tiles in the same order, the products by the
// wgmma model over k16 steps (all 8 of a tile for P V: pv_depth=tile), and the scalar steps from
// emu/attention/softmax/attention_steps.hpp.
#include <cstdint>

#include "gpu/kernels/hopper/config.cuh"
#include "gpu/kernels/hopper/consumer_state.cuh"
#include "gpu/kernels/hopper/epilogue.cuh"
#include "gpu/kernels/hopper/gemms.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"
#include "gpu/kernels/hopper/mainloop.cuh"
#include "gpu/kernels/hopper/producer.cuh"
#include "gpu/kernels/hopper/shared_storage.cuh"
#include "gpu/kernels/hopper/softmax.cuh"
#include "gpu/kernels/hopper/tile_walk.cuh"
#include "gpu/primitives/register_budget.hpp"
#include "gpu/primitives/sync.hpp"
#include "gpu/primitives/warp.hpp"

namespace roundscope::gpu::hopper {

/// The BF16 kernel's tile steps (mainloop.cuh says what each is): 128 keys a tile, the GEMMs of
/// gemms.cuh, the softmax and the cast of softmax.cuh.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg, bool ScaledP>
struct Bf16Steps {
    static constexpr int block_n = hopper::block_n;
    using Params = ForwardParams;
    using State = ConsumerState<D>;
    ROUNDSCOPE_DEVICE static void issue_scores(State& c, ConsumerOperands& in, RingSlot slot) {
        hopper::issue_scores<D>(c.s, in.ring, in.smem, in.q_rows, slot);
    }
    ROUNDSCOPE_DEVICE static void issue_pv(State& c, ConsumerOperands& in, RingSlot slot) {
        hopper::issue_pv<D>(c.o, c.p, in.ring, in.smem, slot);
    }
    template <bool Masked>
    ROUNDSCOPE_DEVICE static void softmax(const Params& p, State& c, std::uint64_t key0, float (&factor)[2]) {
        softmax_tile<D, Exp2, Arg, Masked>(p, c, key0, factor);
    }
    ROUNDSCOPE_DEVICE static void rescale_and_cast(const Params& p, State& c, const float (&factor)[2]) {
        hopper::rescale_and_cast<D, ScaledP>(p, c, factor);
    }
};

/// One consumer warpgroup (w = 0, 1): rows row0 + 64 w .. + 63 of the block.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg, bool ScaledP>
ROUNDSCOPE_DEVICE void consume(const ForwardParams& p, const TileWalk<block_n>& walk, SharedStorage<D>& smem,
                               std::uint64_t row0, std::uint64_t head) {
    const unsigned t = threadIdx.x % 128, w = threadIdx.x / 128, lane = t % 32;
    const std::uint32_t base = shared_address(&smem);
    ConsumerOperands in{
        KvPipeline(smem.ring), base,
        base + static_cast<std::uint32_t>(offsetof(SharedStorage<D>, q)) + SharedStorage<D>::q_rows_offset(w)};
    ConsumerState<D> state;
    state.rows[0] = row0 + 64 * w + 16 * (t / 32) + lane / 4, state.rows[1] = state.rows[0] + 8;
    ROUNDSCOPE_UNROLL
    for (int x = 0; x < D / 2; ++x) state.o[x] = 0;
    mbarrier_wait_parity(&smem.q_full, 0);
    mainloop<Bf16Steps<D, Exp2, Arg, ScaledP>>(p, walk, in, state, row0);
    epilogue<D>(p, state, smem, row0, head);
}

/// Exp2: the recipe's exp2 (software, ex2.approx or ex2.approx.ftz), Arg its argument's form and
/// ScaledP whether P is scaled (p_scale not 1), fixed at compile time so that the inner loop holds
/// one of each.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg, bool ScaledP>
ROUNDSCOPE_KERNEL void ROUNDSCOPE_LAUNCH_BOUNDS(threads, 1) forward_kernel(ROUNDSCOPE_GRID_CONSTANT ForwardParams p) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    (void)p;  // built for a GPU without wgmma and TMA: the host never launches it there
#else
    std::byte* shared = shared_memory<std::byte>();
    shared += (swizzle_period - shared_address(shared) % swizzle_period) % swizzle_period;
    auto& smem = *reinterpret_cast<SharedStorage<D>*>(shared);
    const std::uint64_t head = blockIdx.y, row0 = static_cast<std::uint64_t>(blockIdx.x) * block_m;
    const std::uint64_t rows = p.n_q - row0 < block_m ? p.n_q - row0 : block_m;
    const TileWalk<block_n> walk{(p.n_kv + block_n - 1) / block_n, row0 + rows, p.n_q, p.n_kv, p.causal, p.reverse};
    if (threadIdx.x == 0) {
        mbarrier_init(&smem.q_full, 1);
        KvPipeline(smem.ring).init(consumer_threads);
        fence_mbarrier_init();  // the copy engine completes its loads on them
    }
    sync_threads();
    if (threadIdx.x < consumer_threads) {
        warpgroup_registers_increase<consumer_registers>();
        consume<D, Exp2, Arg, ScaledP>(p, walk, smem, row0, head);
    } else {
        warpgroup_registers_decrease<producer_registers>();
        if (threadIdx.x / 32 == consumer_threads / 32 && elect_one())  // one thread of the first producer warp
            produce<D>(p, walk, smem, static_cast<std::int32_t>(row0), static_cast<std::int32_t>(head));
    }
#endif
}

}  // namespace roundscope::gpu::hopper
