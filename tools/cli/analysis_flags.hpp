#pragma once
// Options every analysis command shares: the size and seed of a synthetic input, and the
// output and threading flags.
#include <CLI/CLI.hpp>

#include <cstdint>

namespace roundscope::cli {

/// --synthetic, --n, --d and --seed (synthetic inputs).
inline void add_synthetic_flags(CLI::App* cmd, bool& synthetic, std::uint64_t& n, std::uint64_t& d, std::uint64_t& seed) {
    cmd->add_flag("--synthetic", synthetic, "Synthesize the input instead of reading a file");
    cmd->add_option("--n", n, "Tokens (synthetic)")->check(CLI::PositiveNumber);
    cmd->add_option("--d", d, "Head dimension (synthetic)")->check(CLI::Range(2, 1024));
    cmd->add_option("--seed", seed, "Seed (synthetic)");
}

/// --json and --threads.
inline void add_output_flags(CLI::App* cmd, bool& json, int& threads) {
    cmd->add_flag("--json", json, "Print one JSON object");
    cmd->add_option("--threads", threads, "Worker threads (default: all cores)")->check(CLI::NonNegativeNumber);
}

}  // namespace roundscope::cli
