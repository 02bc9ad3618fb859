#pragma once
// The MUFU probe on the local GPU: each variant of gpu/probes/mufu_variants.hpp over all 2^32 inputs.
#include <cstdint>
#include <vector>

#include "gpu/probes/mufu_variants.hpp"

namespace roundscope::gpu {

/// mufu_chunks digests: chunk j sums emu::conversion_mix(x, out(x)) mod 2^64 over its inputs
/// (emu/batch/conversion_digest.hpp), so any single differing output changes its chunk.
/// Throws Error without a usable GPU.
std::vector<std::uint64_t> mufu_digests(MufuVariant v);

/// The output bits for the inputs [first, first + count).
std::vector<std::uint32_t> mufu_outputs(MufuVariant v, std::uint32_t first, std::uint32_t count);

}  // namespace roundscope::gpu
