#pragma once
// The round-up decision of the two stochastic modes, given the discarded part of a value as a
// fraction rem / 2^s of one unit in the last place (0 < rem < 2^s).
#include <cstdint>

#include "lib/bits.hpp"
#include "lib/philox.hpp"

namespace roundscope::emu {

/// Bits [32k, 32k + 32) after the binary point of the fraction rem / 2^s.
ROUNDSCOPE_HD constexpr std::uint32_t fraction_word(std::uint64_t rem, int s, int k) {
    const int shift = s - 32 * (k + 1);
    const std::uint64_t w = shift >= 0 ? shift_right(rem, shift) : shift_left(rem, -shift);
    return static_cast<std::uint32_t>(w);
}

/// Exact probabilities: with U = 0.w(0) w(1) w(2)... the stream's bits read as a binary
/// fraction, round up iff U < rem / 2^s. The comparison reads words only until they differ,
/// so P(up) is exactly rem / 2^s however many bits rem / 2^s needs.
ROUNDSCOPE_HD constexpr bool stochastic_exact_rounds_up(std::uint64_t rem, int s, const RandomStream& rng) {
    for (int k = 0; 32 * k < s; ++k) {
        const std::uint32_t t = fraction_word(rem, s, k);
        const std::uint32_t u = rng.word(static_cast<std::uint32_t>(k));
        if (u != t) return u < t;
    }
    return false;  // U >= rem / 2^s
}

/// N random bits (hardware `cvt.rs` style): the N leading discarded bits, floor(rem * 2^N / 2^s),
/// plus an N-bit random integer R (the top N bits of w(0)); a carry out rounds up. So
/// P(up) = floor(rem * 2^N / 2^s) / 2^N: discarded bits below the N leading ones are ignored.
ROUNDSCOPE_HD constexpr bool stochastic_bits_rounds_up(std::uint64_t rem, int s, int n, const RandomStream& rng) {
    const std::uint64_t leading = s >= n ? shift_right(rem, s - n) : rem << (n - s);
    const std::uint64_t random = rng.word(0) >> (32 - n);
    return leading + random >= (std::uint64_t{1} << n);
}

}  // namespace roundscope::emu
