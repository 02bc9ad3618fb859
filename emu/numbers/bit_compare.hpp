#pragma once
// Comparing two results bit for bit, as `crosscheck` and the GPU tests report it: how many
// elements match, the largest distance in units in the last place, the first mismatch.
#include <cstdint>
#include <optional>
#include <vector>

#include "emu/numbers/format.hpp"

namespace roundscope::emu {

/// The number of representable values of `f` from a to b (0 when equal; +0 and -0 are one
/// value apart, as adjacent encodings; a NaN against anything else counts as the largest distance).
std::uint64_t ulp_distance(const Format& f, std::uint32_t a, std::uint32_t b);

struct BitComparison {
    std::uint64_t matched = 0, total = 0, max_ulp = 0;
    std::optional<std::uint64_t> first_mismatch;  // index into the tensors
};

/// expected against got, element by element, both in format f.
BitComparison compare_bits(const std::vector<std::uint32_t>& expected, const std::vector<std::uint32_t>& got,
                           const Format& f);

/// Float32 values compared by their bits.
BitComparison compare_bits(const std::vector<float>& expected, const std::vector<float>& got);

}  // namespace roundscope::emu
