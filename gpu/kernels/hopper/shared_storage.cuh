#pragma once
// A block's shared memory for head dimension D, as one struct: Q, the K/V ring's tiles and the
// barriers. Each tile is D / 64 panels of 128 rows x 64 BF16 columns in the 128-byte swizzle,
// so every tile starts on the swizzle's period (checked below); the block asks for one period
// more than the struct, to align it (dynamic shared memory is only 16-byte aligned on the GPU).
#include <cstddef>
#include <cstdint>

#include "gpu/kernels/hopper/config.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"

namespace roundscope::gpu::hopper {

template <int D>
struct SharedStorage {
    static constexpr int panels = D / panel_cols;
    static constexpr std::uint32_t tile_bytes = panels * panel_bytes;  // 128 rows x D

    std::byte q[tile_bytes];  // Q; once read, each consumer warpgroup's 64 rows stage its O
    std::byte k[stages][tile_bytes];
    std::byte v[stages][tile_bytes];
    std::uint64_t q_full;  // Q has landed
    KvBarriers ring;

    /// Consumer warpgroup w's 64 rows within each panel of Q (128-byte rows): the rows its S reads,
    /// then where it stages its O.
    static constexpr std::uint32_t q_rows_offset(unsigned warpgroup) { return warpgroup * 64 * 128; }
    /// A tile's offset in the struct (what descriptors add to the struct's shared address).
    static constexpr std::uint32_t k_offset(std::uint32_t stage);
    static constexpr std::uint32_t v_offset(std::uint32_t stage);
};

template <int D>
constexpr std::uint32_t SharedStorage<D>::k_offset(std::uint32_t stage) {
    return offsetof(SharedStorage, k) + stage * tile_bytes;
}
template <int D>
constexpr std::uint32_t SharedStorage<D>::v_offset(std::uint32_t stage) {
    return offsetof(SharedStorage, v) + stage * tile_bytes;
}

/// The dynamic shared memory a block of head dimension D asks for.
template <int D>
inline constexpr std::size_t shared_bytes = sizeof(SharedStorage<D>) + swizzle_period;

template <int D>
constexpr bool tiles_on_the_swizzle_period() {
    using S = SharedStorage<D>;
    return offsetof(S, q) % swizzle_period == 0 && S::k_offset(0) % swizzle_period == 0 &&
           S::tile_bytes % swizzle_period == 0 && S::v_offset(0) % swizzle_period == 0;
}
static_assert(tiles_on_the_swizzle_period<64>() && tiles_on_the_swizzle_period<128>());

}  // namespace roundscope::gpu::hopper
