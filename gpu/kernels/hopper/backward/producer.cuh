#pragma once
// The backward producer: one thread of the producer warpgroup loads the block's two held tiles
// once, then streams the walk's tiles through the ring (the forward's KvPipeline, its operand k
// the first streamed tile, v the second), each slot once the consumers released what it held.
#include <cstdint>

#include "gpu/kernels/hopper/backward/config.cuh"
#include "gpu/kernels/hopper/backward/shared_storage.cuh"
#include "gpu/kernels/hopper/backward/stream_walk.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"
#include "gpu/primitives/sync.hpp"
#include "gpu/primitives/tma.hpp"

namespace roundscope::gpu::hopper::backward {

/// held: the maps of the two held tiles, whose first row is held0; streamed: the two maps the
/// walk streams.
template <int D>
ROUNDSCOPE_DEVICE void produce(const TmaMap* const (&held)[2], const TmaMap* const (&streamed)[2],
                               const StreamWalk& walk, BackwardStorage<D>& smem, std::int32_t head) {
    using S = BackwardStorage<D>;
    mbarrier_arrive(&smem.held_full, 2 * S::tile_bytes);
    for (int x = 0; x < 2; ++x)
        for (int c = 0; c < S::panels; ++c)
            tma_load(held[x], smem.held[x] + c * panel_bytes, c * panel_cols, static_cast<std::int32_t>(walk.held0),
                     head, &smem.held_full);
    KvPipeline ring(smem.ring);
    RingSlot slot;
    std::uint32_t loaded = 0;
    for (std::uint64_t step = 0; step < walk.tiles; ++step) {
        if (walk.skipped(step)) continue;
        const auto start = static_cast<std::int32_t>(walk.start(step));
        const bool first_pass = loaded < stages;
        for (const KvOperand x : {KvOperand::k, KvOperand::v}) {
            ring.acquire(x, slot, first_pass);
            std::uint64_t* landed = ring.commit(x, slot, S::tile_bytes);
            std::byte* tile = smem.streamed[slot.stage][static_cast<int>(x)];
            for (int c = 0; c < S::panels; ++c)
                tma_load(streamed[static_cast<int>(x)], tile + c * panel_bytes, c * panel_cols, start, head, landed);
        }
        slot = slot.next(), ++loaded;
    }
}

}  // namespace roundscope::gpu::hopper::backward
