#pragma once
// Bit manipulation shared by host and device code.
#include <bit>
#include <cstdint>
#include <vector>

#include "lib/host_device.hpp"

namespace roundscope {

/// Number of bits needed to hold v (0 for v == 0).
ROUNDSCOPE_HD constexpr int bit_width(std::uint64_t v) {
#if defined(__CUDA_ARCH__)
    return 64 - __clzll(static_cast<long long>(v));
#else
    return v == 0 ? 0 : 64 - __builtin_clzll(v);
#endif
}

/// v >> s for any s >= 0 (C++ leaves shifts by 64 or more undefined).
ROUNDSCOPE_HD constexpr std::uint64_t shift_right(std::uint64_t v, int s) { return s >= 64 ? 0 : v >> s; }
/// v << s for any s >= 0.
ROUNDSCOPE_HD constexpr std::uint64_t shift_left(std::uint64_t v, int s) { return s >= 64 ? 0 : v << s; }
/// The s low bits of v, for any s >= 0.
ROUNDSCOPE_HD constexpr std::uint64_t low_bits(std::uint64_t v, int s) {
    return s >= 64 ? v : v & ((std::uint64_t{1} << s) - 1);
}

ROUNDSCOPE_HD constexpr std::uint64_t bits_of(double x) { return std::bit_cast<std::uint64_t>(x); }
ROUNDSCOPE_HD constexpr std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }
ROUNDSCOPE_HD constexpr double double_from_bits(std::uint64_t u) { return std::bit_cast<double>(u); }
ROUNDSCOPE_HD constexpr float float_from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

/// The bit patterns of floats, for comparing results bit for bit (host code).
inline std::vector<std::uint32_t> float_bits(const std::vector<float>& x) {
    std::vector<std::uint32_t> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = bits_of(x[i]);
    return out;
}

}  // namespace roundscope
