#pragma once
// wgmma's shared-memory operands as the MMA probes store them: the canonical K-major layout
// without swizzling (gpu/primitives/wgmma_descriptor.hpp), 8-row x 16-byte core matrices consecutive along K
// (leading byte offset 128), then along the rows (stride byte offset 128 K / elements-per-16-bytes),
// and the descriptor that names such an operand.
#include <cstdint>

#include "gpu/primitives/tile_operands.cuh"
#include "gpu/primitives/wgmma_descriptor.hpp"

namespace roundscope::gpu {

// The probes' operand of depth k at shared address `start`.
__device__ inline WgmmaOperand probe_operand(std::uint32_t start, int k, int element_bytes) {
    return {start, 128, static_cast<std::uint32_t>(128 * k / (16 / element_bytes)), 0, Swizzle::none};
}

// Byte offset of element (r, c) of a K-major operand of depth k.
__device__ inline int core_matrix_offset(int r, int c, int k, int element_bytes) {
    return static_cast<int>(k_major_address(probe_operand(0, k, element_bytes), static_cast<std::uint32_t>(r),
                                            static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(element_bytes)));
}

// A 64-row tile's A and B (as B^T: 8 rows of k, K-major like A) stored into shared memory, the
// low element_bytes bytes of each bit pattern, by the block's threads. The caller fences the
// stores for the async proxy and synchronizes before a wgmma reads them.
__device__ inline void store_wgmma_operands(const TileOperands& op, int k, int element_bytes, unsigned char* smem_a,
                                            unsigned char* smem_b) {
    auto store = [element_bytes](unsigned char* at, std::uint32_t bits) {
        for (int i = 0; i < element_bytes; ++i) at[i] = static_cast<unsigned char>(bits >> (8 * i));
    };
    for (int i = threadIdx.x; i < 64 * k; i += blockDim.x)
        store(smem_a + core_matrix_offset(i / k, i % k, k, element_bytes), op.A(i / k, i % k));
    for (int i = threadIdx.x; i < 8 * k; i += blockDim.x)
        store(smem_b + core_matrix_offset(i / k, i % k, k, element_bytes), op.B(i % k, i / k));
}

// The descriptor of the probes' operand at `smem`.
__device__ inline std::uint64_t matrix_descriptor(const void* smem, int k, int element_bytes) {
    const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
    return encode_descriptor(probe_operand(address, k, element_bytes));
}

}  // namespace roundscope::gpu
