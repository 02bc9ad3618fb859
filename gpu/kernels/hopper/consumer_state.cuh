#pragma once
// What a consumer thread carries from tile to tile, all in registers.
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "gpu/kernels/hopper/config.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"

namespace roundscope::gpu::hopper {

/// One of the thread's rows: its online state (row_sum=quad-ffma: l is kept per lane, the four
/// lanes' shares joined in the epilogue).
struct RowState {
    float m = emu::steps::minus_infinity(), m_raw = emu::steps::minus_infinity();
    float lane_sum = 0;  // this lane's share of l
};

/// A consumer thread's two rows (its warp's lane / 4 and lane / 4 + 8) and their state, its share
/// of O, the ring slot of the tile whose P V comes next, and the scores of the tile in flight (S,
/// then P-bar in the same registers) with the previous tile's P cast for its P V.
template <int D>
struct ConsumerState {
    std::uint64_t rows[2];
    RowState st[2];
    float o[D / 2];
    RingSlot slot;                 // the ring slot of the tile whose P is in p
    float s[block_n / 2];          // s[4 j + e]: row rows[e / 2], key key0 + 8 j + 2 (lane % 4) + e % 2
    std::uint32_t p[block_n / 4];  // [2 j + r]: P of row r at keys 8 j + 2 (lane % 4) and + 1, BF16
};

}  // namespace roundscope::gpu::hopper
