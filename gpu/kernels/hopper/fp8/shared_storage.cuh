#pragma once
// An FP8 block's shared memory for head dimension D, as one struct: Q (128 rows of D bytes, one
// swizzle span a row), the K/V ring's tiles (K: block_n rows of D bytes; V^T: block_n / 32
// panels of D rows x 32 keys in the 32-byte swizzle) and the barriers. Every tile starts on
// the 128-byte swizzle's period (checked below), which is a multiple of the others'.
#include <cstddef>
#include <cstdint>

#include "gpu/kernels/hopper/fp8/config.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"

namespace roundscope::gpu::hopper::fp8 {

template <int D>
struct SharedStorage {
    static constexpr std::uint32_t q_bytes = block_m * D;
    static constexpr std::uint32_t tile_bytes = block_n<D> * D;  // K's rows; as many bytes of V^T
    static constexpr std::uint32_t v_panel_bytes = key_panel * D;

    std::byte q[q_bytes];
    std::byte k[stages][tile_bytes];
    std::byte v[stages][tile_bytes];
    std::uint64_t q_full;  // Q has landed
    KvBarriers ring;

    /// Consumer warpgroup w's 64 rows of Q.
    static constexpr std::uint32_t q_rows_offset(unsigned warpgroup) { return warpgroup * 64 * D; }
    static constexpr std::uint32_t k_offset(std::uint32_t stage) {
        return offsetof(SharedStorage, k) + stage * tile_bytes;
    }
    static constexpr std::uint32_t v_offset(std::uint32_t stage) {
        return offsetof(SharedStorage, v) + stage * tile_bytes;
    }
};

/// The dynamic shared memory a block of head dimension D asks for.
template <int D>
inline constexpr std::size_t shared_bytes = sizeof(SharedStorage<D>) + swizzle_period;

template <int D>
constexpr bool tiles_on_the_swizzle_period() {
    using S = SharedStorage<D>;
    return offsetof(S, q) % swizzle_period == 0 && S::k_offset(0) % swizzle_period == 0 &&
           S::tile_bytes % swizzle_period == 0 && S::v_offset(0) % swizzle_period == 0 &&
           S::q_rows_offset(1) % swizzle_period == 0;
}
static_assert(tiles_on_the_swizzle_period<64>() && tiles_on_the_swizzle_period<128>());

}  // namespace roundscope::gpu::hopper::fp8
