#pragma once
// Batch casts over spans: SIMD (Highway, runtime dispatch) and multi-threaded, giving exactly
// the bits of the scalar round_to_format for every element (tests/emu/batch/test_batch_exhaustive.cpp
// checks all 2^32 float32 inputs). Element i of a batch uses random stream first_index + i, so
// a batch cut into pieces gives the same bits as one call.
#include <cstdint>
#include <span>

#include "emu/numbers/cast_options.hpp"
#include "emu/numbers/format.hpp"

namespace roundscope::emu {

struct BatchSpec {
    std::uint64_t first_index = 0;  // random-stream index of element 0
    int threads = 0;                // 0 = all hardware threads
};

/// Unsigned integer type wide enough for a format's bit patterns.
constexpr int storage_bytes(const Format& f) { return f.bits <= 8 ? 1 : f.bits <= 16 ? 2 : f.bits <= 32 ? 4 : 8; }

/// float32 or float64 -> format; float64 is rounded directly, never through float32.
/// Bits is std::uint8_t, uint16_t, uint32_t or uint64_t and must hold storage_bytes(to); `out`
/// has in.size() elements (an Error names the format otherwise).
template <class Real, class Bits>
void cast_batch(std::span<const Real> in, const Format& to, const CastOptions& o, std::span<Bits> out,
                BatchSpec b = {});

/// Bit patterns (storage_bytes(from) wide, 8 or 16 bits) -> float or double: exact, except
/// that float output rounds to nearest-even where the format is wider than float.
template <class Bits, class Real>
void decode_batch(const Format& from, std::span<const Bits> in, std::span<Real> out, int threads = 0);

}  // namespace roundscope::emu
