#pragma once
// A backward block's shared memory for head dimension D: two tiles it holds for its whole walk
// and a ring of two tiles it streams, each tile D / 64 panels of 128 rows x 64 BF16 columns in
// the 128-byte swizzle (the forward's layout: gpu/kernels/hopper/shared_storage.cuh). The dK/dV
// kernel holds K and V and streams Q and dO over the row blocks; the dQ kernel holds Q and dO
// and streams K and V over the key tiles. A held tile is read K-major (S^T = K Q^T) and a
// streamed one both K-major and MN-major (dV += P^T dO reads dO as V is read in P V).
#include <cstddef>
#include <cstdint>

#include "gpu/kernels/hopper/config.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"

namespace roundscope::gpu::hopper::backward {

template <int D>
struct BackwardStorage {
    static constexpr int panels = D / panel_cols;
    static constexpr std::uint32_t tile_bytes = panels * panel_bytes;  // 128 rows x D

    std::byte held[2][tile_bytes];              // dK/dV: K, V; dQ: Q, dO
    std::byte streamed[stages][2][tile_bytes];  // dK/dV: Q, dO; dQ: K, V (the ring's operands k, v)
    std::uint64_t held_full;                    // both held tiles have landed
    KvBarriers ring;

    static constexpr std::uint32_t held_offset(int x) { return offsetof(BackwardStorage, held) + x * tile_bytes; }
    static constexpr std::uint32_t streamed_offset(std::uint32_t stage, KvOperand x) {
        return offsetof(BackwardStorage, streamed) + (stage * 2 + static_cast<std::uint32_t>(x)) * tile_bytes;
    }
    /// Consumer warpgroup w's 64 rows within each panel of a tile (128-byte rows).
    static constexpr std::uint32_t rows_offset(unsigned warpgroup) { return warpgroup * 64 * 128; }
};

template <int D>
inline constexpr std::size_t backward_shared_bytes = sizeof(BackwardStorage<D>) + swizzle_period;

template <int D>
constexpr bool backward_tiles_on_the_swizzle_period() {
    using S = BackwardStorage<D>;
    return S::held_offset(0) % swizzle_period == 0 && S::tile_bytes % swizzle_period == 0 &&
           S::streamed_offset(0, KvOperand::k) % swizzle_period == 0;
}
static_assert(backward_tiles_on_the_swizzle_period<64>() && backward_tiles_on_the_swizzle_period<128>());

}  // namespace roundscope::gpu::hopper::backward
