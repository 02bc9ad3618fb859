#include "cli/cast_flags.hpp"

#include "cli/option_checks.hpp"

namespace roundscope::cli {

emu::CastOptions CastFlags::options(const emu::Format& to_format) const {
    emu::CastPolicy policy;
    policy.convention = emu::convention_named(convention);
    policy.rounding = round;
    if (sat || nosat) policy.saturate = sat;
    policy.flush_input = flush_input, policy.flush_output = flush_output;
    policy.seed = seed;
    return emu::cast_options(policy, to_format);
}

CLI::Validator format_name() {
    return accepted_by([](const std::string& name) { emu::format_named(name); }, "FORMAT");
}

CLI::Validator rounding_mode() {
    return accepted_by(
        [](const std::string& text) {
            emu::CastOptions o;
            emu::parse_rounding_mode(text, o);
        },
        "MODE");
}

void add_cast_flags(CLI::App& cmd, CastFlags& flags) {
    cmd.add_option("--to", flags.to, "Target format (see `roundscope formats`)")->required()->check(format_name());
    cmd.add_option("--round", flags.round, "Rounding mode: rne rna rtz up down odd sr sr:N (default rne)")
        ->check(rounding_mode());
    auto* sat = cmd.add_flag("--sat", flags.sat, "Saturate overflow and Inf to the max finite value");
    cmd.add_flag("--nosat", flags.nosat, "Overflow gives Inf, or NaN where the format has no Inf")->excludes(sat);
    cmd.add_option("--convention", flags.convention, "Special-value conventions: cuda, ocp, ml_dtypes, torch")
        ->check(accepted_by([](const std::string& name) { emu::convention_named(name); }, "CONVENTION"))
        ->capture_default_str();
    cmd.add_flag("--flush-input", flags.flush_input, "Read subnormal inputs as zero");
    cmd.add_flag("--flush-output", flags.flush_output, "Flush subnormal results to zero");
    cmd.add_option("--seed", flags.seed, "Seed of the stochastic modes")->check(seed_value())->capture_default_str();
}

}  // namespace roundscope::cli
