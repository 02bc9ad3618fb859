#pragma once
// A consumer warpgroup's two GEMMs on the tensor cores, each one wgmma group issued once its
// ring operand has landed: S = Q K^T (both operands in shared memory, K-major) and O += P V (P
// from registers, V read MN-major). Their registers stay the wgmma's until the group completes.
#include <cstdint>

#include "gpu/kernels/hopper/config.cuh"
#include "gpu/kernels/hopper/kv_pipeline.cuh"
#include "gpu/kernels/hopper/shared_storage.cuh"
#include "gpu/primitives/wgmma.hpp"

namespace roundscope::gpu::hopper {

/// K-major descriptor of a 128-byte-swizzled tile of rows x D (panels of 64 columns) at k16 step kk.
ROUNDSCOPE_DEVICE inline std::uint64_t k_major_step(std::uint32_t tile, int kk) {
    return encode_descriptor(
        {tile + static_cast<std::uint32_t>(kk / 4) * panel_bytes + static_cast<std::uint32_t>(kk % 4) * 32, 16, 1024, 0,
         Swizzle::b128});
}

/// MN-major descriptor of V's keys 16 kk .. 16 kk + 15: 128-byte rows of 64 columns, panels LBO apart.
ROUNDSCOPE_DEVICE inline std::uint64_t mn_major_step(std::uint32_t tile, int kk) {
    return encode_descriptor({tile + static_cast<std::uint32_t>(kk) * 16 * 128, panel_bytes, 1024, 0, Swizzle::b128});
}

/// Issues S = Q K^T of a ring slot over D / 16 chained k16 steps, once its K has landed (smem:
/// the shared address of the block's SharedStorage; q_rows: of the warpgroup's rows of Q).
template <int D>
ROUNDSCOPE_DEVICE void issue_scores(float (&s)[block_n / 2], KvPipeline& ring, std::uint32_t smem, std::uint32_t q_rows,
                                    RingSlot slot) {
    ring.wait(KvOperand::k, slot);
    wgmma_fence();
    ROUNDSCOPE_UNROLL
    for (int kk = 0; kk < D / 16; ++kk)
        wgmma_bf16_ss<block_n>(s, k_major_step(q_rows, kk),
                               k_major_step(smem + SharedStorage<D>::k_offset(slot.stage), kk), kk > 0);
    wgmma_commit_group();
}

/// Issues O += P V of a ring slot over the tile's 8 k16 steps, once its V has landed; a partial
/// tile's too (pv_depth=tile: the keys past its end are zeros in P and in V). Unrolled, so that P
/// and O stay in registers and the wgmmas issue back to back.
template <int D>
ROUNDSCOPE_DEVICE void issue_pv(float (&o)[D / 2], const std::uint32_t (&p)[block_n / 4], KvPipeline& ring,
                                std::uint32_t smem, RingSlot slot) {
    ring.wait(KvOperand::v, slot);
    wgmma_fence();
    const std::uint32_t v_tile = smem + SharedStorage<D>::v_offset(slot.stage);
    ROUNDSCOPE_UNROLL
    for (int kk = 0; kk < block_n / 16; ++kk) {
        const std::uint32_t a_frag[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
        wgmma_bf16_rs<D, Major::mn>(o, a_frag, mn_major_step(v_tile, kk), true);
    }
    wgmma_commit_group();
}

}  // namespace roundscope::gpu::hopper
