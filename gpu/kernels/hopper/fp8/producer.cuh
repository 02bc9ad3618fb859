#pragma once
// The FP8 kernel's producer: one thread issues the TMA loads, Q once, then each tile's K (one
// box of block_n rows) and V^T (block_n / 32 boxes of 32 keys x D) into its ring slot once the
// consumers have released what the slot held. Keys past the end land as zeros (V^T's padding to
// 32 keys is zeros from the host, the rest the copy engine's fill).
#include <cstdint>

#include "gpu/kernels/hopper/fp8/config.cuh"
#include "gpu/kernels/hopper/fp8/shared_storage.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"
#include "gpu/kernels/hopper/tile_walk.cuh"
#include "gpu/primitives/sync.hpp"
#include "gpu/primitives/tma.hpp"

namespace roundscope::gpu::hopper::fp8 {

template <int D>
ROUNDSCOPE_DEVICE void produce(const ForwardParams& p, const TileWalk<block_n<D>>& walk, SharedStorage<D>& smem,
                               std::int32_t row0, std::int32_t head) {
    using S = SharedStorage<D>;
    mbarrier_arrive(&smem.q_full, S::q_bytes);
    tma_load(&p.q_map, smem.q, 0, row0, head, &smem.q_full);
    KvPipeline ring(smem.ring);
    RingSlot slot;
    std::uint32_t loaded = 0;
    for (std::uint64_t step = 0; step < walk.tiles; ++step) {
        if (walk.skipped(step)) continue;
        const auto key0 = static_cast<std::int32_t>(walk.key0(step));
        const bool first_pass = loaded < stages;
        ring.acquire(KvOperand::k, slot, first_pass);
        tma_load(&p.k_map, smem.k[slot.stage], 0, key0, head, ring.commit(KvOperand::k, slot, S::tile_bytes));
        ring.acquire(KvOperand::v, slot, first_pass);
        std::uint64_t* v_landed = ring.commit(KvOperand::v, slot, S::tile_bytes);
        for (int c = 0; c < block_n<D> / key_panel; ++c)
            tma_load(&p.vt_map, smem.v[slot.stage] + c * S::v_panel_bytes, key0 + c * key_panel, 0, head, v_landed);
        slot = slot.next(), ++loaded;
    }
}

}  // namespace roundscope::gpu::hopper::fp8
