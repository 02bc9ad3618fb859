#pragma once
// wgmma's shared-memory operands in the canonical K-major layout without swizzling (PTX ISA,
// "Shared memory matrix layouts"): 8-row x 16-byte core matrices, consecutive along K (leading
// byte offset 128), then along the rows (stride byte offset 128 K / elements-per-16-bytes), and the
// 64-bit matrix descriptor that names such an operand. Shared by the MMA probes.
#include <cstdint>

#include "gpu/tile_operands.cuh"

namespace roundscope::gpu {

// Byte offset of element (r, c) of a K-major operand of depth k.
__device__ inline int core_matrix_offset(int r, int c, int k, int element_bytes) {
    const int per_row = 16 / element_bytes, along_k = k / per_row;
    return ((r / 8) * along_k + c / per_row) * 128 + (r % 8) * 16 + (c % per_row) * element_bytes;
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

// Start address, leading and stride byte offsets (all >> 4), no swizzling.
__device__ inline std::uint64_t matrix_descriptor(const void* smem, int k, int element_bytes) {
    const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
    const std::uint64_t lbo = 128 >> 4, sbo = (128 * k / (16 / element_bytes)) >> 4;
    return (static_cast<std::uint64_t>(address >> 4) & 0x3FFF) | lbo << 16 | sbo << 32;
}

}  // namespace roundscope::gpu
