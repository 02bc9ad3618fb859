#pragma once
// The flash-attention kernels' parts (CUTLASS's habit: a kernel is a composition of named
// parts, each of which the emulator also has): operand views for mma.sync fragments, and one
// warp-cooperative tile product D = A B + C over any depth, in the order the tensor-core model
// chains instructions (k0 = 0, depth, 2 depth, ...; a partial last chunk zero-padded).
//
// Every tile product is cut into 16 x 8 output sub-tiles shared round-robin by the block's
// warps, and operands are read element by element from wherever they live: simple and slow,
// deliberately, so that the kernel reads as the emulator does (docs/design.md, "CUDA twins").
#include <cstdint>

#include "gpu/primitives/mma_sync.cuh"

namespace roundscope::gpu {

/// A row-major matrix of bit patterns with zero outside [rows) x [cols): A(r, c) and, read as
/// the B operand, B(k, n) = (*this)(k, n).
struct MatrixView {
    const std::uint32_t* data;
    std::uint64_t rows, cols, stride;
    ROUNDSCOPE_DEVICE std::uint32_t at(std::uint64_t r, std::uint64_t c) const {
        return r < rows && c < cols ? data[r * stride + c] : 0u;
    }
};

/// The transpose of a MatrixView: element (r, c) is the view's (c, r).
struct TransposedView {
    MatrixView m;
    ROUNDSCOPE_DEVICE std::uint32_t at(std::uint64_t r, std::uint64_t c) const { return m.at(c, r); }
};

/// A(r, c) and B(k, n) of one mma.sync: A's rows from row0 and columns from k0, B's rows from
/// k0 and columns from n0 (the fragment loaders add the offsets inside one instruction).
template <class AView, class BView>
struct InstructionOperands {
    AView a;
    BView b;
    std::uint64_t row0, k0, n0;
    ROUNDSCOPE_DEVICE std::uint32_t A(int r, int c) const {
        return a.at(row0 + static_cast<std::uint64_t>(r), k0 + static_cast<std::uint64_t>(c));
    }
    ROUNDSCOPE_DEVICE std::uint32_t B(int k, int n) const {
        return b.at(k0 + static_cast<std::uint64_t>(k), n0 + static_cast<std::uint64_t>(n));
    }
};

/// D = A B + C for A [m][depth], B [depth][n] and C, D float32 bits read and written through
/// `c_at(r, c)` / `d_store(r, c, bits)` (only inside [m) x [n)). All warps of the block take
/// part; the caller synchronizes before D is read.
template <Input in, class AView, class BView, class CAt, class DStore>
ROUNDSCOPE_DEVICE void block_mma(const AView& a, const BView& b, std::uint64_t m, std::uint64_t n, std::uint64_t depth,
                                 CAt c_at, DStore d_store) {
    const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
    const int warps = static_cast<int>(blockDim.x / 32);
    const std::uint64_t tiles_m = (m + 15) / 16, tiles_n = (n + 7) / 8;
    for (std::uint64_t tile = static_cast<std::uint64_t>(warp); tile < tiles_m * tiles_n;
         tile += static_cast<std::uint64_t>(warps)) {
        const std::uint64_t row0 = tile / tiles_n * 16, col0 = tile % tiles_n * 8;
        std::uint32_t acc[4];
        for (int i = 0; i < 4; ++i) {
            const std::uint64_t r = row0 + static_cast<std::uint64_t>(fragment_row(lane, i));
            const std::uint64_t c = col0 + static_cast<std::uint64_t>(fragment_col(lane, i));
            acc[i] = r < m && c < n ? c_at(r, c) : 0u;
        }
        for (std::uint64_t k0 = 0; k0 < depth; k0 += static_cast<std::uint64_t>(mma_depth(in))) {
            const InstructionOperands<AView, BView> op{a, b, row0, k0, col0};
            std::uint32_t ra[4], rb[2];
            load_a_fragment<in>(op, 0, lane, ra);
            load_b_fragment<in>(op, lane, rb);
            mma_sync<in>(acc, ra, rb);
        }
        for (int i = 0; i < 4; ++i) {
            const std::uint64_t r = row0 + static_cast<std::uint64_t>(fragment_row(lane, i));
            const std::uint64_t c = col0 + static_cast<std::uint64_t>(fragment_col(lane, i));
            if (r < m && c < n) d_store(r, c, acc[i]);
        }
    }
}

}  // namespace roundscope::gpu
