#pragma once
// An FP8 consumer warpgroup's two GEMMs by E4M3 wgmma (m64nNk32), each one group issued once its
// ring operand has landed: S = Q K^T over D / 32 steps (both operands K-major rows of D bytes in
// the 64- or 128-byte swizzle) and O += P V^T over block_n / 32 steps (P from registers, V^T's
// 32-key panels K-major in the 32-byte swizzle).
#include <cstdint>

#include "gpu/kernels/hopper/fp8/config.cuh"
#include "gpu/kernels/hopper/fp8/shared_storage.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"
#include "gpu/primitives/wgmma.hpp"

namespace roundscope::gpu::hopper::fp8 {

/// K-major descriptor of a tile of D-byte rows (eight rows a swizzle period) at k32 step kk.
template <int D>
ROUNDSCOPE_DEVICE inline std::uint64_t qk_step(std::uint32_t tile, int kk) {
    return encode_descriptor({tile + static_cast<std::uint32_t>(kk) * 32, 16, 8 * D, 0, qk_swizzle<D>});
}

/// K-major descriptor of V^T's panel kk: D rows of 32 keys, eight rows a 256-byte period.
template <int D>
ROUNDSCOPE_DEVICE inline std::uint64_t vt_step(std::uint32_t tile, int kk) {
    return encode_descriptor(
        {tile + static_cast<std::uint32_t>(kk) * SharedStorage<D>::v_panel_bytes, 16, 256, 0, Swizzle::b32});
}

template <int D>
ROUNDSCOPE_DEVICE void issue_scores(float (&s)[block_n<D> / 2], KvPipeline& ring, std::uint32_t smem,
                                    std::uint32_t q_rows, RingSlot slot) {
    ring.wait(KvOperand::k, slot);
    wgmma_fence();
    ROUNDSCOPE_UNROLL
    for (int kk = 0; kk < D / 32; ++kk)
        wgmma_e4m3_ss<block_n<D>>(s, qk_step<D>(q_rows, kk),
                                  qk_step<D>(smem + SharedStorage<D>::k_offset(slot.stage), kk), kk > 0);
    wgmma_commit_group();
}

/// O += P V over the tile's block_n / 32 steps; a partial tile's too (pv_depth=tile: the keys
/// past its end are zeros in P and in V^T).
template <int D>
ROUNDSCOPE_DEVICE void issue_pv(float (&o)[D / 2], const std::uint32_t (&p)[block_n<D> / 8], KvPipeline& ring,
                                std::uint32_t smem, RingSlot slot) {
    ring.wait(KvOperand::v, slot);
    wgmma_fence();
    const std::uint32_t v_tile = smem + SharedStorage<D>::v_offset(slot.stage);
    ROUNDSCOPE_UNROLL
    for (int kk = 0; kk < block_n<D> / key_panel; ++kk) {
        const std::uint32_t a_frag[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
        wgmma_e4m3_rs<D>(o, a_frag, vt_step<D>(v_tile, kk), true);
    }
    wgmma_commit_group();
}

}  // namespace roundscope::gpu::hopper::fp8
