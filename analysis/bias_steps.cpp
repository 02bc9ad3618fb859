#include "analysis/bias_steps.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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
    o.recipe.softmax.max_adjust = true;
    o.use_stored_o = false;  // a fixed kernel's O: the file's O is the unfixed kernel's
    o.recipe.name += " with max adjustment";
    return o;
}

BiasOptions with_delta_from_f32_o(BiasOptions o) {
    o.use_stored_o = false;
    emu::AttentionRecipe& r = o.recipe;
    r.scores.product = r.p_and_v.product = emu::Product::exact_f64;
    r.softmax.format = r.p_and_v.p_format = r.output.accumulator = r.output.format = &emu::f32;
    r.p_and_v.p_scale = 1;
    r.p_and_v.v_quant = nullptr;
    r.backward.delta = emu::DeltaKind::f32_o;
    r.backward.delta_format = &emu::f32;
    r.name += " with delta from float32 O";
    return o;
}

StepSigns step_signs(const std::vector<double>& coefficient_sums) {
    StepSigns s;
    for (const double c : coefficient_sums) s.positive += c > 0, s.negative += c < 0;
    const std::uint64_t n = s.positive + s.negative, k = std::min(s.positive, s.negative);
    if (n == 0) return s;
    // P(X <= k) for X ~ Binomial(n, 1/2), term by term in logs (n may be large), doubled.
    const double dn = static_cast<double>(n), log_half_n = dn * std::log(0.5);
    double tail = 0;
    for (std::uint64_t i = 0; i <= k; ++i) {
        const double di = static_cast<double>(i);
        tail += std::exp(std::lgamma(dn + 1) - std::lgamma(di + 1) - std::lgamma(dn - di + 1) + log_half_n);
    }
    s.p_value = std::min(1.0, 2 * tail);
    return s;
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
            step.fixes =
                BiasFixResults{bias_of(input, with_max_adjustment(o)), bias_of(input, with_delta_from_f32_o(o))};
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
    auto signs_of = [&](auto coefficient) {
        std::vector<double> sums;
        for (const BiasStep& step : out.steps) sums.push_back(coefficient(step));
        return step_signs(sums);
    };
    out.signs = signs_of([](const BiasStep& s) { return s.result.coefficient_sum; });
    if (with_fixes) {
        out.max_adjust_signs = signs_of([](const BiasStep& s) { return s.fixes->max_adjust.coefficient_sum; });
        out.delta_from_f32_o_signs =
            signs_of([](const BiasStep& s) { return s.fixes->delta_from_f32_o.coefficient_sum; });
    }
    return out;
}

}  // namespace roundscope::analysis
