#include "analysis/bias_steps.hpp"

#include <fmt/format.h>

#include "lib/error.hpp"

namespace roundscope::analysis {
namespace {

BiasResult bias_of(const BiasStepInput& step, const BiasOptions& o) {
    try {
        return rounding_bias(step.inputs, o);
    } catch (const Error& e) {
        if (step.file.empty()) throw;
        throw Error(step.file + ": " + e.what());
    }
}

}  // namespace

BiasStepSource synthetic_bias_steps(const SyntheticSpec& spec) {
    return [spec](std::size_t i) {
        SyntheticSpec s = spec;
        s.seed = spec.seed + i;
        return BiasStepInput{fmt::format("synthetic step {}", i), "", synthetic_attention(s)};
    };
}

BiasOptions with_max_adjustment(BiasOptions o) {
    o.recipe.max_adjust = true;
    o.use_stored_o = false;  // a fixed kernel's O: the file's O is the unfixed kernel's
    o.recipe.name += " with max adjustment";
    return o;
}

BiasOptions with_delta_from_f32_o(BiasOptions o) {
    o.use_stored_o = false;
    o.recipe.delta = emu::DeltaKind::f32_o;
    o.recipe.delta_format = &emu::f32;
    o.recipe.name += " with delta from float32 O";
    o.use_stored_o = false;
    return o;
}

BiasSteps bias_over_steps(std::size_t count, const BiasStepSource& source, const BiasOptions& options,
                          bool with_fixes) {
    BiasSteps out;
    double running = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const BiasStepInput input = source(i);
        BiasOptions o = options;
        o.causal = options.causal || input.inputs.causal.value_or(false);
        if (options.softmax_scale == 0) o.softmax_scale = input.inputs.softmax_scale.value_or(0);
        BiasStep step{input.label, bias_of(input, o), std::nullopt};
        if (with_fixes)
            step.fixes = BiasFixResults{bias_of(input, with_max_adjustment(o)), bias_of(input, with_delta_from_f32_o(o))};
        if (i > 0 && step.result.query_weight.has_value() == out.query_weight.empty())
            throw Error(input.label + ": " + (step.result.query_weight ? "has" : "lacks") +
                        " the layer input 'x', unlike the first step");
        if (auto& q = step.result.query_weight) {
            out.query_weight.add(*q, input.label);
            // The sum holds what later steps need; each step keeps only its per-head figures.
            q->error = {}, q->structure = {};
        }
        running += step.result.coefficient_sum;
        out.cumulative_coefficient.push_back(running);
        out.steps.push_back(std::move(step));
    }
    return out;
}

}  // namespace roundscope::analysis
