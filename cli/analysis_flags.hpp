#pragma once
// The flags every attention command shares, checked while the command line is parsed: where
// the input comes from (a file IN, or --synthetic with its sizes and seed), and --causal,
// --no-causal, --softmax-scale, --threads, --json.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "analysis/synthetic_attention.hpp"
#include "api/attention_source.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"
#include "lib/error.hpp"

namespace roundscope::cli {

/// IN, or --synthetic with --n, --d, --seed (and --heads, --scenario where a command offers
/// them). The command sets `spec`'s defaults before add_to; the help shows them.
struct InputFlags {
    std::string file;
    bool synthetic = false;
    CLI::Option* synthetic_flag = nullptr;  // what synthetic-only options need (`synthetic_only`)
    analysis::SyntheticSpec spec;
    std::string scenario;  // the name given to --scenario

    void add_to(CLI::App* cmd, const std::string& file_help);
    /// --synthetic, --n, --d and --seed without IN (a command with several input files).
    void add_synthetic(CLI::App* cmd);
    void add_heads(CLI::App* cmd);
    void add_scenario(CLI::App* cmd);
    /// `option` applies to synthetic inputs only: given with a file, it is an error, not ignored.
    CLI::Option* synthetic_only(CLI::Option* option) const;
    /// The request's source: the file IN (read through read_input) or the synthetic inputs; an
    /// Error naming `command` unless exactly one of IN and --synthetic is given.
    api::AttentionSource source(const char* command) const;
};

/// --causal / --no-causal, --softmax-scale, the mask's --causal-alignment, --window-left,
/// --window-right and --softcap (each over the file's metadata of the same name), --launch-heads,
/// --threads and --json.
struct AttentionFlags {
    bool causal = false, no_causal = false, json = false;
    double softmax_scale = 0;                          // 0: the file's metadata, else 1/sqrt(D)
    std::string causal_alignment;                      // empty: the file's metadata, else bottom-right
    std::int64_t window_left = -2, window_right = -2;  // -2: the file's metadata; -1: unbounded
    double softcap = -1;                               // below 0: the file's metadata; 0: none
    std::int64_t launch_heads = 0;                     // 0: the input is the whole launch
    int threads = 0;

    /// `scale_names`: "--softmax-scale", or with an alias ("--softmax-scale,--scale").
    void add_to(CLI::App* cmd, const std::string& scale_names = "--softmax-scale");
    /// The flags as a request's problem choice (what is not given: none).
    api::ProblemChoice problem() const;
};

/// The source of the file `path` (read through read_input, named by its path in messages).
api::AttentionSource file_source(const std::string& path);

/// --json and --threads alone (commands that are not attention commands).
void add_output_flags(CLI::App* cmd, bool& json, int& threads);

using api::ChosenInputs;

/// Error (naming `command`) unless exactly one of IN and --synthetic is given; the memory a
/// synthetic input needs is checked before it is built.
ChosenInputs choose_inputs(const char* command, const InputFlags& input, const AttentionFlags& flags);

/// `in` with its causal flag, softmax scale and mask as the flags and its metadata choose them.
void apply_attention_flags(emu::AttentionInputs& in, const AttentionFlags& flags);

/// `in`'s mask (alignment, window) and soft cap as the flags give them over its metadata.
void apply_mask_flags(emu::AttentionInputs& in, const AttentionFlags& flags);

/// The attention inputs of the file `path`.
ChosenInputs file_inputs(const std::string& path, const AttentionFlags& flags);
/// The attention inputs of a file already read.
ChosenInputs file_inputs(const TensorFile& file, const AttentionFlags& flags);

using api::attention_bytes;
using api::check_synthetic_memory;

/// f(), with an Error it throws prefixed by `input`, the file the analysis read (none: as is),
/// so that a NaN found deep inside names its file as well as its tensor (api::naming_file).
template <class F>
auto naming_input(const std::string& input, F&& f) -> decltype(f()) {
    return api::naming_file(input, std::forward<F>(f));
}

}  // namespace roundscope::cli
