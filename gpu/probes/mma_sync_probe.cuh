#pragma once
// The mma.sync probe: each 16 x 8 tile's operands are loaded from global memory into exactly the
// registers the PTX ISA specifies (gpu/primitives/mma_sync.cuh), one instruction is issued by one warp, and
// D is stored back row-major. Run on the GPU by `roundscope probe` and on the simulated GPU by
// the host tests.
#include <cstdint>
#include <vector>

#include "gpu/primitives/mma_sync.cuh"
#include "gpu/primitives/runtime.hpp"
#include "gpu/primitives/tile_operands.cuh"

namespace roundscope::gpu {

// One warp per 16 x 8 tile.
template <Input in>
ROUNDSCOPE_KERNEL void mma_sync_kernel(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                                       std::uint32_t* d, int k) {
    const int tile = blockIdx.x, lane = threadIdx.x;
    const TileOperands op{a + static_cast<std::size_t>(tile) * 16 * k, b + static_cast<std::size_t>(tile) * k * 8, k};
    std::uint32_t ra[4], rb[2], acc[4];
    load_a_fragment<in>(op, 0, lane, ra);
    load_b_fragment<in>(op, lane, rb);
    const std::size_t base = static_cast<std::size_t>(tile) * 16 * 8;
    for (int i = 0; i < 4; ++i) acc[i] = c[base + fragment_row(lane, i) * 8 + fragment_col(lane, i)];
    mma_sync<in>(acc, ra, rb);
    for (int i = 0; i < 4; ++i) d[base + fragment_row(lane, i) * 8 + fragment_col(lane, i)] = acc[i];
}

/// D of `tiles` tiles A [16][k] B [k][8] + C [16][8] (bit patterns), one mma.sync each.
inline std::vector<std::uint32_t> run_mma_sync_tiles(Input in, const std::vector<std::uint32_t>& a,
                                                     const std::vector<std::uint32_t>& b,
                                                     const std::vector<std::uint32_t>& c, std::int64_t tiles) {
    DeviceBuffer<std::uint32_t> da(a.size()), db(b.size()), dc(c.size()), dd(c.size());
    da.upload(a.data());
    db.upload(b.data());
    dc.upload(c.data());
    const int k = mma_depth(in);
    with_input(in, [&]<Input input>() {
        launch("mma.sync probe", mma_sync_kernel<input>, dim3(static_cast<unsigned>(tiles)), 32, 0, da.get(), db.get(),
               dc.get(), dd.get(), k);
    });
    std::vector<std::uint32_t> d(c.size());
    dd.download(d.data());
    return d;
}

}  // namespace roundscope::gpu
