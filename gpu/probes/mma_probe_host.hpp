#pragma once
// The mma.sync probe on the simulated GPU: the tiles `roundscope probe` runs on a GPU, here run
// by the same kernel on host threads (tests/gpu_host).
#include <cstdint>
#include <vector>

#include "emu/numbers/format.hpp"

namespace roundscope::gpu::simt {

/// D of `tiles` tiles A [16][k] B [k][8] + C [16][8], one simulated mma.sync each (k = 16, or 32
/// for FP8 inputs), with the model of simulated_architecture().
std::vector<std::uint32_t> run_mma_sync_probe(const emu::Format& input, const std::vector<std::uint32_t>& a,
                                              const std::vector<std::uint32_t>& b, const std::vector<std::uint32_t>& c,
                                              std::int64_t tiles);

}  // namespace roundscope::gpu::simt
