#pragma once
// The producer: one thread of the producer warpgroup issues the TMA loads, Q once, then each
// tile's K and V into its ring slot once the consumers have released what the slot held.
#include <cstdint>

#include "gpu/kernels/hopper/config.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"
#include "gpu/kernels/hopper/shared_storage.cuh"
#include "gpu/kernels/hopper/tile_walk.cuh"
#include "gpu/primitives/sync.hpp"
#include "gpu/primitives/tma.hpp"

namespace roundscope::gpu::hopper {

template <int D>
ROUNDSCOPE_DEVICE void produce(const ForwardParams& p, const TileWalk<block_n>& walk, SharedStorage<D>& smem,
                               std::int32_t row0, std::int32_t head) {
    using S = SharedStorage<D>;
    mbarrier_arrive(&smem.q_full, S::tile_bytes);
    for (int c = 0; c < S::panels; ++c)
        tma_load(&p.q_map, smem.q + c * panel_bytes, c * panel_cols, row0, head, &smem.q_full);
    KvPipeline ring(smem.ring);
    RingSlot slot;
    std::uint32_t loaded = 0;
    for (std::uint64_t step = 0; step < walk.tiles; ++step) {
        if (walk.skipped(step)) continue;
        const auto key0 = static_cast<std::int32_t>(walk.key0(step));
        const bool first_pass = loaded < stages;
        ring.acquire(KvOperand::k, slot, first_pass);
        std::uint64_t* k_landed = ring.commit(KvOperand::k, slot, S::tile_bytes);
        for (int c = 0; c < S::panels; ++c)
            tma_load(&p.k_map, smem.k[slot.stage] + c * panel_bytes, c * panel_cols, key0, head, k_landed);
        ring.acquire(KvOperand::v, slot, first_pass);
        std::uint64_t* v_landed = ring.commit(KvOperand::v, slot, S::tile_bytes);
        for (int c = 0; c < S::panels; ++c)
            tma_load(&p.v_map, smem.v[slot.stage] + c * panel_bytes, c * panel_cols, key0, head, v_landed);
        slot = slot.next(), ++loaded;
    }
}

}  // namespace roundscope::gpu::hopper
