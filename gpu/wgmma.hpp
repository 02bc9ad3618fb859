#pragma once
// wgmma for kernel code, one spelling for both builds: wgmma.mma_async m64nNk16 with BF16 inputs
// and float32 accumulators (B from shared memory by descriptor, A by descriptor or from
// registers), and its fence, commit_group and wait_group. Under nvcc the PTX instructions (N =
// 8 so far: wider N take longer operand lists, written when a kernel needs them); with
// ROUNDSCOPE_SIMT_HOST the simulated warpgroup (gpu/host/simt_wgmma.hpp) for any N, which
// snapshots operands at issue and poisons the accumulators until their group is waited for.
// Descriptors: gpu/wgmma_descriptor.hpp.
#include <cstdint>

#include "gpu/simt.hpp"
#include "gpu/wgmma_descriptor.hpp"

#if defined(ROUNDSCOPE_SIMT_HOST)
#include "gpu/host/simt_wgmma.hpp"
#endif

namespace roundscope::gpu {

/// wgmma.fence: the accumulator and A registers written before it are seen by later wgmmas.
ROUNDSCOPE_DEVICE inline void wgmma_fence() {
#if !defined(ROUNDSCOPE_SIMT_HOST)
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
/// from shared memory.
template <int N>
ROUNDSCOPE_DEVICE inline void wgmma_bf16_ss(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,
                                            bool scale_d) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::wgmma_bf16(d, N, desc_a, nullptr, desc_b, scale_d);
#else
    static_assert(N == 8, "the device path of wgmma_bf16_ss is written for N = 8");
    asm volatile(
        "{ .reg .pred p; setp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0; }"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(scale_d))
        : "memory");
#endif
}

/// The same with A from the thread's 4 registers (its warp's 16 rows, mma.sync's A fragment).
template <int N>
ROUNDSCOPE_DEVICE inline void wgmma_bf16_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b,
                                            bool scale_d) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::wgmma_bf16(d, N, 0, a, desc_b, scale_d);
#else
    static_assert(N == 8, "the device path of wgmma_bf16_rs is written for N = 8");
    asm volatile(
        "{ .reg .pred p; setp.ne.b32 p, %9, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0; }"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(scale_d))
        : "memory");
#endif
}

}  // namespace roundscope::gpu
