#pragma once
// The KV tiles a block visits, in the recipe's order (the whole 128-row block's choice of tiles,
// as emu/attention/flash/flash_forward.cpp makes it): the producer loads them and the consumers
// take them in this one order. BlockN: the keys of a tile (128 in BF16; FP8's 160 or 224).
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "gpu/primitives/simt.hpp"

namespace roundscope::gpu::hopper {

template <int BlockN>
struct TileWalk {
    std::uint64_t tiles, row_end, n_q, n_kv;
    bool causal, reverse;
    /// The first key of the walk's step-th tile.
    ROUNDSCOPE_DEVICE std::uint64_t key0(std::uint64_t step) const {
        return (reverse ? tiles - 1 - step : step) * static_cast<std::uint64_t>(BlockN);
    }
    /// No row of the block sees the tile (the causal mask hides it): neither loaded nor taken.
    ROUNDSCOPE_DEVICE bool skipped(std::uint64_t step) const {
        return emu::steps::tile_masked(row_end, key0(step), n_q, n_kv, causal);
    }
    /// The first step at or after `step` whose tile some row sees (tiles if none).
    ROUNDSCOPE_DEVICE std::uint64_t visible_from(std::uint64_t step) const {
        while (step < tiles && skipped(step)) ++step;
        return step;
    }
};

}  // namespace roundscope::gpu::hopper
