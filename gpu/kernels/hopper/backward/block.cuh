#pragma once
// What both backward kernels do with a block before their own work: the shared storage aligned to
// the swizzle's period (dynamic shared memory is only 16-byte aligned), the barriers initialized,
// then the roles split as the forward splits them: the consumer warpgroups (240 registers) run
// the kernel's `consume(smem)`, one thread of the producer warpgroup (24) streams the walk.
#include <cstddef>
#include <cstdint>

#include "gpu/kernels/hopper/backward/producer.cuh"
#include "gpu/kernels/hopper/backward/shared_storage.cuh"
#include "gpu/kernels/hopper/backward/stream_walk.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"
#include "gpu/primitives/register_budget.hpp"
#include "gpu/primitives/sync.hpp"
#include "gpu/primitives/warp.hpp"

namespace roundscope::gpu::hopper::backward {

/// held: the maps of the block's two held tiles; streamed: the two the walk streams.
template <int D, class Consume>
ROUNDSCOPE_DEVICE void run_block(const StreamWalk& walk, const TmaMap* const (&held)[2],
                                 const TmaMap* const (&streamed)[2], std::uint64_t head, Consume consume) {
    std::byte* shared = shared_memory<std::byte>();
    shared += (swizzle_period - shared_address(shared) % swizzle_period) % swizzle_period;
    auto& smem = *reinterpret_cast<BackwardStorage<D>*>(shared);
    if (threadIdx.x == 0) {
        mbarrier_init(&smem.held_full, 1);
        KvPipeline(smem.ring).init(consumer_threads);
        fence_mbarrier_init();  // the copy engine completes its loads on them
    }
    sync_threads();
    if (threadIdx.x < consumer_threads) {
        warpgroup_registers_increase<consumer_registers>();
        consume(smem);
    } else {
        warpgroup_registers_decrease<producer_registers>();
        if (threadIdx.x / 32 == consumer_threads / 32 && elect_one())
            produce<D>(held, streamed, walk, smem, static_cast<std::int32_t>(head));
    }
}

}  // namespace roundscope::gpu::hopper::backward
