#pragma once
// The backward's first pass: delta = rowsum(dO O) of each query row, a thread a row, in order
// over the head dimension (steps::delta_rowsum_f32: delta=o-stored, delta_sum=sequential,
// delta_format=f32), from the bits of dO and of the forward's stored O in BF16 (`f`, passed by
// value: a device takes no host constant by reference).
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "gpu/primitives/simt.hpp"

namespace roundscope::gpu::hopper::backward {

ROUNDSCOPE_KERNEL void delta_kernel(const std::uint32_t* d_o, const std::uint32_t* o, float* delta, std::uint64_t rows,
                                    int d, emu::Format f) {
    const std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const std::uint64_t at = i * static_cast<std::uint64_t>(d);
    delta[i] = emu::steps::delta_rowsum_f32(d_o + at, f, o + at, f, d);
}

}  // namespace roundscope::gpu::hopper::backward
