#pragma once
// wgmma for kernel code, one spelling for both builds: wgmma.mma_async m64nNk16 with BF16 inputs
// or m64nNk32 with E4M3 inputs, and float32 accumulators (B from shared memory by descriptor, A
// by descriptor or from registers), and its fence, commit_group and wait_group. Under nvcc the PTX instructions
// (gpu/primitives/wgmma_instructions.cuh, generated, for the N that kernels use); with
// ROUNDSCOPE_SIMT_HOST the simulated warpgroup (gpu/host/simt_wgmma.hpp) for any N, which
// snapshots operands at issue and poisons the accumulators until their group is waited for, and
// fails a kernel that skips a fence, a commit or a wait, or touches what a wgmma in flight reads.
// Descriptors: gpu/primitives/wgmma_descriptor.hpp.
#include <cstdint>

#include "gpu/primitives/mma_sync.cuh"
#include "gpu/primitives/simt.hpp"
#include "gpu/primitives/wgmma_descriptor.hpp"

#if defined(ROUNDSCOPE_SIMT_HOST)
#include "gpu/host/simt_wgmma.hpp"
#else
#include "gpu/primitives/wgmma_instructions.cuh"
#endif

namespace roundscope::gpu {

/// Where thread t (of the warpgroup's 128) holds D(wgmma_row(t, x), wgmma_col(t, x)) in d[x]: its
/// warp's 16 rows, and in every 8 columns mma.sync's accumulator fragment (the PTX ISA's wgmma
/// D fragment).
ROUNDSCOPE_DEVICE inline int wgmma_row(int t, int x) { return 16 * (t / 32 % 4) + fragment_row(t % 32, x % 4); }
ROUNDSCOPE_DEVICE inline int wgmma_col(int t, int x) { return 8 * (x / 4) + fragment_col(t % 32, x % 4); }

/// wgmma.fence: the accumulator and A registers written before it are seen by later wgmmas.
ROUNDSCOPE_DEVICE inline void wgmma_fence() {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::wgmma_fence();
#else
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}

ROUNDSCOPE_DEVICE inline void wgmma_commit_group() {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::wgmma_commit_group();
#else
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}

/// Waits until at most N committed groups are in flight; their accumulators are then readable.
template <int N>
ROUNDSCOPE_DEVICE inline void wgmma_wait_group() {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::wgmma_wait_group(N);
#else
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}

/// D (N / 2 floats a thread) = A B + (scale_d ? D : 0): A 64 x 16 and B (as N rows of K) 16 x N
/// from shared memory, each K-major or MN-major (imm-trans-a/b).
template <int N, Major AMajor = Major::k, Major BMajor = Major::k>
ROUNDSCOPE_DEVICE inline void wgmma_bf16_ss(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,
                                            bool scale_d) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::wgmma_bf16(d, N, desc_a, nullptr, desc_b, scale_d, AMajor, BMajor);
#else
    detail::WgmmaBf16<N>::template ss<AMajor == Major::mn, BMajor == Major::mn>(d, desc_a, desc_b, scale_d ? 1 : 0);
#endif
}

/// The same with A from the thread's 4 registers (its warp's 16 rows, mma.sync's A fragment).
template <int N, Major BMajor = Major::k>
ROUNDSCOPE_DEVICE inline void wgmma_bf16_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b,
                                            bool scale_d) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::wgmma_bf16(d, N, 0, a, desc_b, scale_d, Major::k, BMajor);
#else
    detail::WgmmaBf16<N>::template rs<BMajor == Major::mn>(d, a, desc_b, scale_d ? 1 : 0);
#endif
}

/// D = A B + (scale_d ? D : 0) with E4M3 inputs: A 64 x 32 and B (as N rows of K) 32 x N from
/// shared memory, both K-major (the PTX ISA transposes only 16-bit operands).
template <int N>
ROUNDSCOPE_DEVICE inline void wgmma_e4m3_ss(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,
                                            bool scale_d) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::wgmma_e4m3(d, N, desc_a, nullptr, desc_b, scale_d);
#else
    detail::WgmmaE4m3<N>::ss(d, desc_a, desc_b, scale_d ? 1 : 0);
#endif
}

/// The same with A from the thread's 4 registers of four E4M3 each (its warp's 16 rows, mma.sync
/// m16n8k32's A fragment: register r holds row l / 4 + 8 (r % 2), columns 4 (l % 4) + 16 (r / 2)
/// and the next three, the lowest byte first).
template <int N>
ROUNDSCOPE_DEVICE inline void wgmma_e4m3_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b,
                                            bool scale_d) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::wgmma_e4m3(d, N, 0, a, desc_b, scale_d);
#else
    detail::WgmmaE4m3<N>::rs(d, a, desc_b, scale_d ? 1 : 0);
#endif
}

}  // namespace roundscope::gpu
