#pragma once
// Warp-level primitives for kernel code, one spelling for both builds: under nvcc, CUDA's
// full-warp intrinsics (mask 0xffffffff); with ROUNDSCOPE_SIMT_HOST, the simulated GPU's
// warp-collective exchange (gpu/host/simt_host.hpp), where every one of the warp's 32 threads
// must call, as the full mask requires on the GPU. Whole warps only: a block's thread count
// is a multiple of 32.
#include <cstdint>

#include "gpu/primitives/simt.hpp"
#include "lib/bits.hpp"

#if defined(ROUNDSCOPE_SIMT_HOST)
#include "gpu/host/simt_host.hpp"
#endif

namespace roundscope::gpu {

inline constexpr unsigned full_warp = 0xffffffffu;

/// The value of lane (this lane XOR lane_mask), lane_mask in [0, 32): shfl.sync.bfly.
ROUNDSCOPE_DEVICE inline std::uint32_t shfl_xor(std::uint32_t value, int lane_mask) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    return simt::warp_exchange(value, static_cast<int>(threadIdx.x % 32) ^ (lane_mask & 31));
#else
    return __shfl_xor_sync(full_warp, value, lane_mask);
#endif
}

/// The value of lane `source` (in [0, 32)): shfl.sync.idx.
ROUNDSCOPE_DEVICE inline std::uint32_t shfl(std::uint32_t value, int source) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    return simt::warp_exchange(value, source & 31);
#else
    return __shfl_sync(full_warp, value, source);
#endif
}

ROUNDSCOPE_DEVICE inline float shfl_xor(float value, int lane_mask) {
    return float_from_bits(shfl_xor(bits_of(value), lane_mask));
}
ROUNDSCOPE_DEVICE inline float shfl(float value, int source) { return float_from_bits(shfl(bits_of(value), source)); }

/// Bit l set where lane l's predicate is true: vote.sync.ballot.
ROUNDSCOPE_DEVICE inline std::uint32_t ballot(bool predicate) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    return simt::warp_ballot(predicate);
#else
    return __ballot_sync(full_warp, predicate);
#endif
}

ROUNDSCOPE_DEVICE inline bool all_lanes(bool predicate) { return ballot(predicate) == full_warp; }
ROUNDSCOPE_DEVICE inline bool any_lane(bool predicate) { return ballot(predicate) != 0; }

/// elect.sync with the full mask: true in one lane of the warp, the same lane at every call, and
/// false in the others. The PTX ISA leaves which lane unspecified; the simulated warp elects
/// lane 31, so that code assuming lane 0 fails there. sm_90 and later.
ROUNDSCOPE_DEVICE inline bool elect_one() {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::warp_ballot(true);  // a warp-collective step, as .sync makes it
    return threadIdx.x % 32 == 31;
#else
    std::uint32_t elected = 0;
    asm volatile("{ .reg .pred p; elect.sync _|p, 0xffffffff; selp.u32 %0, 1, 0, p; }" : "=r"(elected));
    return elected != 0;
#endif
}

/// __syncwarp(): the warp's threads wait for each other, and their shared-memory writes before
/// it are seen after it.
ROUNDSCOPE_DEVICE inline void sync_warp() {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::warp_ballot(true);
#else
    __syncwarp(full_warp);
#endif
}

}  // namespace roundscope::gpu
