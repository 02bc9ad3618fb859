#pragma once
// Validators for numeric options, run while the command line is parsed (before any work). Each
// refuses what its type would silently accept (a NaN, an Inf, -1 wrapping into an unsigned
// seed, 1e39 becoming a float32 Inf) and says what the option takes, e.g.
// "--n: must be an integer from 1 to 1048576, not '0'".
#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include "api/argument_checks.hpp"

namespace roundscope::cli {

/// An integer in [lo, hi], written in decimal without a fraction or exponent.
CLI::Validator integer_in(std::int64_t lo, std::int64_t hi);

/// The same over a range the library declares (api/argument_checks.hpp).
CLI::Validator integer_in(api::IntegerRange range);
CLI::Validator finite_in(api::FiniteRange range);

/// A seed: an integer from 0 to 2^64 - 1.
CLI::Validator seed_value();

/// A finite number in [lo, hi] (lo excluded when `above_lo`).
CLI::Validator finite_in(double lo, double hi, bool above_lo = false);

/// Worker threads: 0 (all cores) to 1024.
CLI::Validator thread_count();

/// Any text but the empty one (an option given as '' would otherwise read as not given).
CLI::Validator non_empty();

/// A value `accept` takes without an Error (a format, a rounding mode, a recipe): the layers below
/// name the value in their message, and CLI11 puts the option in front ("--round: unknown
/// rounding mode 'nearest' ...").
CLI::Validator accepted_by(std::function<void(const std::string&)> accept, std::string description);

/// Checks an option's value names a block format (--format of mx and leak).
CLI::Validator block_format_name();

}  // namespace roundscope::cli
