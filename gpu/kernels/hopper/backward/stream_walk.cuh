#pragma once
// The tiles a backward block streams, in order (emu/attention/flash/flash_backward.cpp's
// grad_schedule=in-order): the dK/dV kernel's row blocks for its 128 keys, the dQ kernel's key
// tiles for its 128 rows. A tile the causal mask hides from the whole 128 x 128 block is skipped,
// as the emulator skips it (not loaded, not multiplied: skipping and adding zeros differ in a
// zero's sign).
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "gpu/kernels/hopper/config.cuh"
#include "gpu/primitives/simt.hpp"

namespace roundscope::gpu::hopper::backward {

struct StreamWalk {
    std::uint64_t tiles;  // row blocks (streams_rows) or key tiles
    std::uint64_t held0;  // the block's first key (streams_rows) or first row
    std::uint64_t n_q, n_kv;
    bool causal, streams_rows;

    /// The first row (streams_rows) or key of the step-th tile.
    ROUNDSCOPE_DEVICE std::uint64_t start(std::uint64_t step) const { return step * 128; }
    ROUNDSCOPE_DEVICE bool skipped(std::uint64_t step) const {
        const std::uint64_t rows0 = streams_rows ? start(step) : held0, keys0 = streams_rows ? held0 : start(step);
        const std::uint64_t row_end = rows0 + block_m < n_q ? rows0 + block_m : n_q;
        return emu::steps::tile_masked(row_end, keys0, n_q, n_kv, causal);
    }
};

}  // namespace roundscope::gpu::hopper::backward
