#pragma once
// Checks emu's scalar casts against the MPFR oracle for one format over a list of inputs, in
// every deterministic mode x saturation x flush-on-input x flush-on-output, with the NaN
// conventions rotating over cuda, ocp, ml_dtypes and torch.
#include <cstdint>
#include <string>

#include "emu/numbers/format.hpp"

namespace roundscope::test {

struct MpfrCheckResult {
    std::uint64_t checked = 0;  // (input, options) pairs
    std::uint64_t mismatches = 0;
    std::string first_mismatch;
};

MpfrCheckResult check_casts_against_mpfr(const emu::Format& f, std::size_t inputs, std::uint64_t seed);

}  // namespace roundscope::test
