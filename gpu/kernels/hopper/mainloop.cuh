#pragma once
// A consumer warpgroup's walk over the KV tiles, pipelined as FlashAttention-3 pipelines a
// warpgroup's tiles: tile j + 1's S and tile j's P V issued together, tile j + 1's softmax run
// while P V is on the tensor cores, O rescaled and P cast once it completes. The arithmetic is
// the unpipelined order's: O = RN(O x factor_j), then O += P_j V_j, tile after tile.
//
// The walk is the same for every Hopper kernel; what a tile's steps are is the kernel's Steps:
//   block_n                  the keys of a tile
//   Params, State            the launch's parameters, a consumer thread's registers (with `slot`,
//                            the ring slot of the tile whose P is cast)
//   issue_scores(c, in, s)   S of ring slot s into c's scores, one wgmma group
//   issue_pv(c, in, s)       O += P V of ring slot s, one wgmma group
//   softmax<Masked>(p, c, key0, factor)   the online softmax of the scores (the tile at key0),
//                            each row's rescale factor into `factor`
//   rescale_and_cast(p, c, factor)        O times the factors, and the tile's P cast
// (the BF16 kernel's: hopper_flash_kernel.cuh; the FP8 kernel's: fp8/fp8_steps.cuh).
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "gpu/kernels/hopper/kv_pipeline.cuh"
#include "gpu/kernels/hopper/tile_walk.cuh"
#include "gpu/primitives/wgmma.hpp"

namespace roundscope::gpu::hopper {

/// Where a consumer warpgroup's operands live: the ring, the shared address of the block's
/// shared storage, and of the warpgroup's 64 rows of Q.
struct ConsumerOperands {
    KvPipeline ring;
    std::uint32_t smem, q_rows;
};

/// The first tile: its S and softmax alone, its P cast for the next step's P V.
template <class Steps, bool Masked>
ROUNDSCOPE_DEVICE void first_step(const typename Steps::Params& p, ConsumerOperands& in, typename Steps::State& c,
                                  std::uint64_t key0) {
    Steps::issue_scores(c, in, c.slot);
    wgmma_wait_group<0>();
    in.ring.release(KvOperand::k, c.slot);
    float factor[2];
    Steps::template softmax<Masked>(p, c, key0, factor);
    Steps::rescale_and_cast(p, c, factor);
}

/// One step: the next tile's S and the current tile's P V, the next softmax beside P V.
template <class Steps, bool MaskedNext>
ROUNDSCOPE_DEVICE void pipelined_step(const typename Steps::Params& p, ConsumerOperands& in, typename Steps::State& c,
                                      std::uint64_t next_key0) {
    const RingSlot current = c.slot, next = current.next();  // the current tile's P is cast in c.p
    Steps::issue_scores(c, in, next);
    Steps::issue_pv(c, in, current);
    wgmma_wait_group<1>();  // the next tile's S (the older group) has completed
    in.ring.release(KvOperand::k, next);
    float factor[2];
    Steps::template softmax<MaskedNext>(p, c, next_key0, factor);
    wgmma_wait_group<0>();  // and the current tile's P V
    in.ring.release(KvOperand::v, current);
    Steps::rescale_and_cast(p, c, factor);
    c.slot = next;
}

/// The last tile's P V.
template <class Steps>
ROUNDSCOPE_DEVICE void last_step(ConsumerOperands& in, typename Steps::State& c) {
    Steps::issue_pv(c, in, c.slot);
    wgmma_wait_group<0>();
    in.ring.release(KvOperand::v, c.slot);
}

/// Every tile the block's rows [row0, ..) see, into the state's O and row statistics. The tiles
/// every row of the block sees whole need no mask; in the walk's order they are one run, the
/// others (a partial last tile, the causal diagonal) before it (reverse) or after it: three
/// loops, so that the run's holds no mask at all.
template <class Steps>
ROUNDSCOPE_DEVICE void mainloop(const typename Steps::Params& p, const TileWalk<Steps::block_n>& walk,
                                ConsumerOperands& in, typename Steps::State& c, std::uint64_t row0) {
    const std::uint64_t seen_by_all = emu::steps::visible_keys(row0, p.n_q, p.n_kv, p.causal);
    auto whole = [&](std::uint64_t step) { return walk.key0(step) + Steps::block_n <= seen_by_all; };
    std::uint64_t next = walk.visible_from(0);
    if (next >= walk.tiles) return;
    if (whole(next))
        first_step<Steps, false>(p, in, c, walk.key0(next));
    else
        first_step<Steps, true>(p, in, c, walk.key0(next));
    for (next = walk.visible_from(next + 1); next < walk.tiles && !whole(next); next = walk.visible_from(next + 1))
        pipelined_step<Steps, true>(p, in, c, walk.key0(next));
    for (; next < walk.tiles && whole(next); ++next) pipelined_step<Steps, false>(p, in, c, walk.key0(next));
    for (next = walk.visible_from(next); next < walk.tiles; next = walk.visible_from(next + 1))
        pipelined_step<Steps, true>(p, in, c, walk.key0(next));
    last_step<Steps>(in, c);
}

}  // namespace roundscope::gpu::hopper
