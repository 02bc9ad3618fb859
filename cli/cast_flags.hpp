#pragma once
// The rounding flags shared by every command that casts: --to, --round, --sat/--nosat,
// --convention, --flush-input/--flush-output, --seed. Each value is checked while the command
// line is parsed; what they mean together is emu::CastPolicy's.
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "emu/numbers/cast_options.hpp"
#include "emu/numbers/format.hpp"

namespace roundscope::cli {

struct CastFlags {
    std::string to;
    std::string round;
    std::string convention = "cuda";
    bool sat = false, nosat = false;
    bool flush_input = false, flush_output = false;
    std::uint64_t seed = 0;

    /// The options for casts into `to`: the convention's, then each flag given on top.
    emu::CastOptions options(const emu::Format& to) const;
};

void add_cast_flags(CLI::App& cmd, CastFlags& flags);

/// Checks an option's value names a format (--to, --from).
CLI::Validator format_name();

/// Checks an option's value is a rounding mode (--round).
CLI::Validator rounding_mode();

}  // namespace roundscope::cli
