#pragma once
// Where an analysis's attention inputs come from (a file, arrays the caller holds, or a synthetic
// scenario) and the mask and scale chosen over a file's metadata: the part of every analysis
// request that says what it runs on.
#include <cstdint>
#include <optional>
#include <string>

#include "analysis/synthetic_attention.hpp"
#include "api/file_source.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"
#include "lib/error.hpp"
#include "lib/tensor.hpp"

namespace roundscope::api {

/// A file of attention tensors (q, k, v, ...), or synthetic inputs.
struct AttentionSource : FileSource {
    bool synthetic = false;
    analysis::SyntheticSpec spec;         // synthetic: sizes, seed, and the command's default scenario
    std::optional<std::string> scenario;  // synthetic: a scenario by name over spec's
};

/// The problem as a request states it: the mask, scale and soft cap, each over the file's metadata of
/// the same name where it is not given, and the launch the inputs are a part of.
struct ProblemChoice {
    std::optional<bool> causal;                             // none: the file's metadata, else off
    std::optional<double> softmax_scale;                    // none: the file's metadata, else 1/sqrt(D)
    std::optional<std::string> causal_alignment;            // bottom-right or top-left
    std::optional<std::int64_t> window_left, window_right;  // -1: unbounded
    std::optional<double> softcap;                          // 0: none
    // B x H of the launch the inputs are a part of (one head of a layer, measured alone): PyTorch's
    // split-KV and split-key choices read the whole grid. None: the inputs are the whole launch.
    std::optional<std::int64_t> launch_heads;
};

/// ArgumentError unless `name` is bottom-right or top-left.
void check_alignment(const std::string& name);
/// ArgumentError for a value out of its range or an alignment that is not one.
void validate(const ProblemChoice& problem);
/// ArgumentError for a synthetic size, seed or scenario out of range (`command` names the
/// request where it has both a file and synthetic inputs or neither).
void validate(const char* command, const AttentionSource& source);

/// A request's inputs, with the mask and scale its choice and the file's metadata give.
struct ChosenInputs {
    emu::AttentionInputs in;
    bool causal = false;
    double softmax_scale = 0;  // 0: 1/sqrt(D)
};

/// The inputs of `source` under `problem`; the memory a synthetic input needs is checked before it
/// is built.
ChosenInputs choose_inputs(const char* command, const AttentionSource& source, const ProblemChoice& problem);

/// The attention inputs of a file already read, under `problem`.
ChosenInputs file_inputs(const TensorFile& file, const ProblemChoice& problem);

/// `in` with its causal flag, softmax scale and mask as `problem` and its metadata choose them.
void apply_problem(emu::AttentionInputs& in, const ProblemChoice& problem);
/// `in`'s mask (alignment, window) and soft cap as `problem` gives them over its metadata; its
/// causal flag and scale as they are.
void apply_problem_shape(emu::AttentionInputs& in, const ProblemChoice& problem);

/// Memory that emulating (and with `truth`, the exact attention of) `in` takes beyond the
/// inputs: operands and outputs per element, and the truth's 24 bytes per score of each head
/// in flight.
double attention_bytes(const emu::AttentionInputs& in, bool backward, bool truth, int threads);

/// Memory that synthetic inputs of `spec` take, with the copies an analysis makes of them.
double synthetic_bytes(const analysis::SyntheticSpec& spec);
/// Refuses (check_memory) a synthetic input that cannot fit, naming its sizes.
void check_synthetic_memory(const analysis::SyntheticSpec& spec);

}  // namespace roundscope::api
