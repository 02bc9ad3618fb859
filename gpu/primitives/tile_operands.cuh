#pragma once
// The operands of one probe tile as the MMA probes read them: bit patterns, row-major, A
// [rows][k] and B [k][8]. One header for the probes compiled by nvcc and for the simulated GPU.
#include <cstdint>

#include "gpu/primitives/simt.hpp"

namespace roundscope::gpu {

struct TileOperands {
    const std::uint32_t* a;  // [rows][k]
    const std::uint32_t* b;  // [k][8]
    int k;
    ROUNDSCOPE_DEVICE std::uint32_t A(int r, int c) const { return a[r * k + c]; }
    ROUNDSCOPE_DEVICE std::uint32_t B(int r, int c) const { return b[r * 8 + c]; }
};

}  // namespace roundscope::gpu
