#pragma once
// Options every analysis command shares: the size and seed of a synthetic input, and the
// output and threading flags.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "analysis/synthetic_attention.hpp"
#include "emu/attention/attention_inputs.hpp"
#include "lib/error.hpp"

namespace roundscope::cli {

/// --synthetic, --n, --d and --seed (synthetic inputs).
inline void add_synthetic_flags(CLI::App* cmd, bool& synthetic, std::uint64_t& n, std::uint64_t& d,
                                std::uint64_t& seed) {
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

/// A command's inputs: the synthetic ones of `spec`, or the file's (whose metadata may turn on
/// the causal mask and set the softmax scale).
struct ChosenInputs {
    emu::AttentionInputs in;
    bool causal = false;
    double softmax_scale = 0;  // 0: 1/sqrt(D)
};

/// Error (naming `command`) unless exactly one of `input` and `synthetic` is given.
ChosenInputs choose_inputs(const char* command, const std::string& input, bool synthetic,
                           const analysis::SyntheticSpec& spec, bool causal);

/// f(), with an Error it throws prefixed by `input`, the file the analysis read (none: as is),
/// so that a NaN found deep inside names its file as well as its tensor.
template <class F>
auto naming_input(const std::string& input, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const Error& e) {
        if (input.empty()) throw;
        throw Error(input + ": " + e.what());
    }
}

}  // namespace roundscope::cli
