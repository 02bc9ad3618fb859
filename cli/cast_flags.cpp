#include "cli/cast_flags.hpp"

#include "lib/error.hpp"
#include "cli/option_checks.hpp"

namespace roundscope::cli {

emu::CastOptions CastFlags::options(const emu::Format& to_format) const {
    const auto convention_value = emu::parse_convention(convention);
    if (!convention_value)
        throw Error("--convention " + convention + ": unknown convention (expected cuda, ocp, ml_dtypes or torch)");
    emu::CastOptions o = emu::convention_options(*convention_value, to_format);
    if (!round.empty()) emu::parse_rounding_mode(round, o);
    if (sat) o.saturate = true;
    if (nosat) o.saturate = false;
    o.flush_input = o.flush_input || flush_input;
    o.flush_output = o.flush_output || flush_output;
    o.seed = seed;
    return o;
}

void add_cast_flags(CLI::App& cmd, CastFlags& flags) {
    cmd.add_option("--to", flags.to, "Target format (see `roundscope formats`)")->required();
    cmd.add_option("--round", flags.round, "Rounding mode: rne rna rtz up down odd sr sr:N (default rne)");
    auto* sat = cmd.add_flag("--sat", flags.sat, "Saturate overflow and Inf to the max finite value");
    cmd.add_flag("--nosat", flags.nosat, "Overflow gives Inf, or NaN where the format has no Inf")->excludes(sat);
    cmd.add_option("--convention", flags.convention, "Special-value conventions: cuda, ocp, ml_dtypes, torch")
        ->capture_default_str();
    cmd.add_flag("--flush-input", flags.flush_input, "Read subnormal inputs as zero");
    cmd.add_flag("--flush-output", flags.flush_output, "Flush subnormal results to zero");
    cmd.add_option("--seed", flags.seed, "Seed of the stochastic modes")->check(seed_value())->capture_default_str();
}

const emu::Format& require_format(const std::string& name, const std::string& option) {
    if (const emu::Format* f = emu::find_format(name)) return *f;
    std::string known;
    for (const emu::Format& f : emu::all_formats) known += (known.empty() ? "" : ", ") + std::string(f.name);
    throw Error(option + " " + name + ": unknown format (known: " + known + ")");
}

}  // namespace roundscope::cli
