#pragma once
// A special-function unit recovered from a capture (mufu_capture.hpp), with no knowledge of
// how it computes: one hypothesis of structure per function, whose free parts (a table over
// one binade, the input quantisation, the final rounding, the NaN output) are read off the
// capture's windows, then checked against every 2^16-input digest of all 2^32 inputs.
//
//   ex2: 2^x = 2^n T[f] with n.f = Q(x 2^23) in fixed point (Q: floor, nearest even, toward
//        zero or ceiling), T read from (-2, -1]; results below 2^-126 flushed; the non-ftz
//        variant halves x below -126 and squares the result (the guard ptxas emits).
//   lg2: log2 x = R(e + L[m]) for x = 2^e (1 + m 2^-23), L a fixed-point table with F <= 24
//        fraction bits read off [1, 2), R (nearest even, toward zero, down, up) from [0.5, 1)
//        and [2, 4); non-ftz: subnormals scaled by 2^24 and 24 subtracted.
//   rcp: 1/x = 2^-e R[m], R read from [1, 2); subnormal results flushed.
// Subnormal inputs of ftz variants are zeros (PTX ISA). The NaN output is the canonical
// 0x7FFFFFFF or the input made quiet, whichever the NaN chunks' digests say.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/gpu/mufu/mufu_capture.hpp"

namespace roundscope::gpu {

enum class FixedRounding : std::uint8_t { floor, nearest_even, toward_zero, ceiling };

struct MufuModel {
    MufuVariant variant{};
    std::vector<std::uint32_t> table;               // 2^23 entries: ex2 and rcp output bits at n = 0; lg2 L * 2^F
    FixedRounding rounding = FixedRounding::floor;  // ex2: the input quantisation; lg2: the sum's
    int fraction_bits = 0;                          // lg2: F
    bool canonical_nan = true;                      // NaN gives 0x7FFFFFFF, else the input made quiet

    std::uint32_t operator()(std::uint32_t x) const;
    std::string describe() const;
};

struct MufuFit {
    std::optional<MufuModel> model;  // absent when no hypothesis fits the windows
    std::vector<std::string> log;    // what was tried, and how each candidate fared
};

/// The model the windows determine (digests are used only to pick the NaN rule).
MufuFit fit_mufu_model(const MufuCapture& capture, int threads = 0);

/// The chunks whose digest the model does not reproduce (empty: bit-exact on all 2^32 inputs).
std::vector<std::size_t> failing_chunks(const MufuModel& model, const std::vector<std::uint64_t>& digests,
                                        int threads = 0);

std::string_view fixed_rounding_name(FixedRounding r);

}  // namespace roundscope::gpu
