#pragma once
// What an FP8 consumer thread carries from tile to tile, all in registers: the BF16 kernel's, over
// FP8's wider tile, with P packed four E4M3 to a register as the k32 A fragment takes it.
#include <cstdint>

#include "gpu/kernels/hopper/consumer_state.cuh"
#include "gpu/kernels/hopper/fp8/config.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"

namespace roundscope::gpu::hopper::fp8 {

template <int D>
struct ConsumerState {
    std::uint64_t rows[2];
    RowState st[2];  // lane_sum: the lane's share of l (row_sum=lane-tile)
    float o[D / 2];
    RingSlot slot;                    // the ring slot of the tile whose P is in p
    float s[block_n<D> / 2];          // s[4 j + e]: row rows[e / 2], key key0 + 8 j + 2 (lane % 4) + e % 2
    std::uint32_t p[block_n<D> / 8];  // [4 kk + r]: k32 step kk's A fragment register r (config.cuh)
};

}  // namespace roundscope::gpu::hopper::fp8
