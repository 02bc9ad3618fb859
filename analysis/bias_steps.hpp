#pragma once
// The BF16 rounding bias over training steps: rounding_bias on each step's inputs (optionally
// also under the paper's two fixes), the coefficient accumulated step after step, and, where
// the inputs hold the layer input x, the dW^Q errors summed. Shared by `roundscope bias` and
// the demo. Steps are built and analysed one at a time, so memory does not grow with inputs.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis/query_weight_error.hpp"
#include "analysis/rounding_bias.hpp"
#include "analysis/synthetic_attention.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"

namespace roundscope::analysis {

/// One step's inputs. `file` is the file they came from (empty for synthetic ones): errors
/// found while analysing them are prefixed with it.
struct BiasStepInput {
    std::string label, file;
    emu::AttentionInputs inputs;
};

/// Step i of `count` (called once per step, in order).
using BiasStepSource = std::function<BiasStepInput(std::size_t i)>;

/// Synthetic repeated-max steps: `spec` with seeds spec.seed, spec.seed + 1, ...
BiasStepSource synthetic_bias_steps(const SyntheticSpec& spec);

/// The two fixes of arXiv:2510.04212 applied to a recipe; O is then the emulated fixed
/// kernel's, never a file's (which the unfixed kernel wrote). The max adjustment moves a block
/// max that several scores reach above them all (their attention.py); delta from a float32 O
/// recomputes the forward pass in float32 from the same low-precision q, k, v (the paper's
/// "recompute O in FP32 when calculating delta": S, P-bar, P V and the running O in float32,
/// the products exact and rounded once) and forms delta from that O in float32.
BiasOptions with_max_adjustment(BiasOptions o);
BiasOptions with_delta_from_f32_o(BiasOptions o);

/// The signs of per-step coefficient sums: the paper's statistic (one sign, step after step).
/// Rows within a step share their keys and are not independent; steps are.
struct StepSigns {
    std::uint64_t positive = 0, negative = 0;
    double p_value = 1;  // two-sided exact binomial (sign) test of positive against negative
};
StepSigns step_signs(const std::vector<double>& coefficient_sums);

struct BiasFixResults {
    BiasResult max_adjust, delta_from_f32_o;
};

struct BiasStep {
    std::string label;
    BiasResult result;
    std::optional<BiasFixResults> fixes;
};

struct BiasSteps {
    std::vector<BiasStep> steps;
    std::vector<double> cumulative_coefficient;  // after each step
    StepSigns signs;
    std::optional<StepSigns> max_adjust_signs, delta_from_f32_o_signs;  // with the fixes
    QueryWeightSteps query_weight;                                      // empty when the inputs have no x
};

/// `options.causal` turns the mask on for every step, and a nonzero `options.softmax_scale`
/// sets every step's; otherwise a step's own causal flag and softmax scale apply to it. Throws Error when a step has x
/// and another lacks it.
BiasSteps bias_over_steps(std::size_t count, const BiasStepSource& source, const BiasOptions& options, bool with_fixes);

}  // namespace roundscope::analysis
