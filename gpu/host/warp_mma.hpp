#pragma once
// mma.sync on the simulated GPU: a warp-collective step. Each of the warp's 32 threads hands
// in its A, B and C registers; once all have, the warp's matrices are rebuilt from the
// registers by the PTX ISA's fragment tables (written here from the ISA, independently of the
// kernels' fragment loaders in gpu/primitives/mma_sync.cuh, so that a wrong loader gives wrong bits), D is
// computed by emu's tensor-core model of the simulated architecture, and each thread gets its
// D registers back.
#include <array>
#include <cstdint>

#include "emu/numbers/format.hpp"

namespace roundscope::gpu::simt {

/// One mma.sync.aligned.m16n8k16 (16-bit inputs) or m16n8k32 (FP8) .row.col.f32 by the calling
/// thread's warp; every thread of the warp must call it.
void warp_mma(const emu::Format& input, std::uint32_t (&d)[4], const std::uint32_t (&a)[4],
              const std::uint32_t (&b)[2]);

/// The warp's A matrix from its lanes' mma.sync A registers (a: the calling lane's 4), by the same
/// fragment table: 16 x 16 elements of 16 bits (m16n8k16), or with fp8 16 x 32 of 8 bits
/// (m16n8k32), row-major bits with a row's K elements contiguous (16 or 32 apart). A
/// warp-collective step (wgmma with A from registers).
std::array<std::uint32_t, 16 * 32> warp_a_matrix(const std::uint32_t* a, bool fp8 = false);

}  // namespace roundscope::gpu::simt
