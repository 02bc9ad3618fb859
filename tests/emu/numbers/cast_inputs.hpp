#pragma once
// Inputs for cast tests: every boundary of a format (each value, each midpoint, each midpoint
// times (1 +- 2^-40), max, overflow threshold, min normal, min subnormal and half of it,
// +-0, Inf, NaN) and random inputs up to a count: random binary64 patterns, binary64 values
// with 53-bit significands spread over the format's exponent range, random binary32 patterns.
#include <cstdint>
#include <vector>

#include "emu/numbers/format.hpp"

namespace roundscope::test {

struct CastInput {
    double x;
    bool from_f32;  // x is a float32 value, cast through the float32 entry point
};

std::vector<CastInput> cast_inputs(const emu::Format& f, std::size_t count, std::uint64_t seed);

}  // namespace roundscope::test
