#pragma once
// The FlashAttention-3-style FP8 forward kernel for Hopper (sm_90a), whose arithmetic is the
// recipe h100-fp8 (emu/attention/recipe/recipe_presets.cpp): the BF16 kernel's block, threads,
// ring and pipelined walk (hopper_flash_kernel.cuh, gpu/kernels/hopper/), with FP8's own parts in
// gpu/kernels/hopper/fp8/:
//   config.cuh          FP8's tiles (128 x 160 at D = 64, 128 x 224 at D = 128), V^T's key
//                       permutation, the parameters a launch takes
//   shared_storage.cuh  Q, the K/V^T ring, the barriers
//   producer.cuh        the TMA loads of Q, K and V^T's 32-key panels
//   gemms.cuh           S = Q K^T and O += P V by E4M3 wgmma (m64nNk32)
//   softmax.cuh         the online softmax with the max offset, row_sum=lane-tile, P's E4M3 cast
//   fp8_steps.cuh       those parts as the walk's steps (gpu/kernels/hopper/mainloop.cuh)
//   epilogue.cuh        FlashAttention-3's: O = RN(acc rcp.approx.ftz(l)), the LSE from l 2^-k
//
// Bit for bit the emulator's h100-fp8: the same tiles in the same order, the products by the FP8
// wgmma model over k32 steps (all of a tile's for P V: pv_depth=tile), and the scalar steps from
// emu/attention/softmax/attention_steps.hpp.
#include <cstdint>

#include "gpu/kernels/hopper/config.cuh"
#include "gpu/kernels/hopper/fp8/config.cuh"
#include "gpu/kernels/hopper/fp8/epilogue.cuh"
#include "gpu/kernels/hopper/fp8/fp8_steps.cuh"
#include "gpu/kernels/hopper/fp8/producer.cuh"
#include "gpu/kernels/hopper/fp8/shared_storage.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"
#include "gpu/kernels/hopper/mainloop.cuh"
#include "gpu/kernels/hopper/tile_walk.cuh"
#include "gpu/primitives/register_budget.hpp"
#include "gpu/primitives/sync.hpp"
#include "gpu/primitives/warp.hpp"

namespace roundscope::gpu::hopper::fp8 {

/// One consumer warpgroup (w = 0, 1): rows row0 + 64 w .. + 63 of the block.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg>
ROUNDSCOPE_DEVICE void consume(const ForwardParams& p, const TileWalk<block_n<D>>& walk, SharedStorage<D>& smem,
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
    mainloop<Fp8Steps<D, Exp2, Arg>>(p, walk, in, state, row0);
    epilogue<D>(p, state, head);
}

/// Exp2: the recipe's exp2 and Arg its argument's form, fixed at compile time.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg>
ROUNDSCOPE_KERNEL void ROUNDSCOPE_LAUNCH_BOUNDS(threads, 1) forward_kernel(ROUNDSCOPE_GRID_CONSTANT ForwardParams p) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    (void)p;  // built for a GPU without wgmma and TMA: the host never launches it there
#else
    std::byte* shared = shared_memory<std::byte>();
    shared += (swizzle_period - shared_address(shared) % swizzle_period) % swizzle_period;
    auto& smem = *reinterpret_cast<SharedStorage<D>*>(shared);
    const std::uint64_t head = blockIdx.y, row0 = static_cast<std::uint64_t>(blockIdx.x) * block_m;
    const std::uint64_t rows = p.n_q - row0 < block_m ? p.n_q - row0 : block_m;
    const TileWalk<block_n<D>> walk{
        (p.n_kv + block_n<D> - 1) / block_n<D>, row0 + rows, p.n_q, p.n_kv, p.causal, p.reverse};
    if (threadIdx.x == 0) {
        mbarrier_init(&smem.q_full, 1);
        KvPipeline(smem.ring).init(consumer_threads);
        fence_mbarrier_init();  // the copy engine completes its loads on them
    }
    sync_threads();
    if (threadIdx.x < consumer_threads) {
        warpgroup_registers_increase<consumer_registers>();
        consume<D, Exp2, Arg>(p, walk, smem, row0, head);
    } else {
        warpgroup_registers_decrease<producer_registers>();
        if (threadIdx.x / 32 == consumer_threads / 32 && elect_one())  // one thread of the first producer warp
            produce<D>(p, walk, smem, static_cast<std::int32_t>(row0), static_cast<std::int32_t>(head));
    }
#endif
}

}  // namespace roundscope::gpu::hopper::fp8
