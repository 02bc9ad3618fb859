#pragma once
// An invented special-function unit for the kit's dry run (no GPU): a table of quadratic
// segments in fixed point, truncated, with the PTX ISA's special cases, in the style Oberman
// and Siu describe (ARITH-17, 2005). It is NOT a model of any GPU. Its only job is to be an
// unknown function with hardware-like structure, so that the fitting tools (mufu_fitting.hpp)
// can be shown to recover a unit bit for bit from a capture without being told its formula.
#include <cstdint>
#include <vector>

#include "gpu/probes/mufu_variants.hpp"

namespace roundscope::gpu::fake {

/// The invented unit's output bits for the input bits `x`.
std::uint32_t evaluate(MufuVariant v, std::uint32_t x);

/// What gpu::mufu_digests and gpu::mufu_outputs return for the invented unit.
std::vector<std::uint64_t> digests(MufuVariant v, int threads = 0);
std::vector<std::uint32_t> outputs(MufuVariant v, std::uint32_t first, std::uint32_t count);

}  // namespace roundscope::gpu::fake
