#pragma once
// The order-free digest of a conversion over all 2^32 float32 inputs, the same on the GPU
// (gpu/probes/mma_probe.cu) and the CPU: chunk j of 2^24 inputs sums conversion_mix(x, bits(x)) mod
// 2^64, so any one differing output changes its chunk's digest (unless two errors cancel,
// with probability 2^-64).
#include <cstdint>
#include <vector>

#include "emu/numbers/cast_options.hpp"
#include "emu/numbers/format.hpp"
#include "lib/host_device.hpp"

namespace roundscope::emu {

inline constexpr int conversion_digest_chunks = 256;

/// SplitMix64's finalizer of the input pattern and the output bits.
ROUNDSCOPE_HD constexpr std::uint64_t conversion_mix(std::uint32_t x, std::uint32_t out) {
    std::uint64_t z = (static_cast<std::uint64_t>(x) << 32 | out) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/// The conversion `roundscope probe` digests on the GPU: CUDA's round to nearest even, with
/// satfinite for the 8-bit formats (cvt.rn.satfinite).
CastOptions probed_conversion_options(const Format& to);

/// The digests of emu's float32 -> `to` cast (16 bits or fewer) under `options`, on `threads`
/// threads: what gpu::conversion_digests must equal.
std::vector<std::uint64_t> emulated_conversion_digests(const Format& to, const CastOptions& options, int threads = 0);

}  // namespace roundscope::emu
