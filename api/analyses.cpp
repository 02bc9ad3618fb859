#include "api/analyses.hpp"

#include <fmt/format.h>

#include <optional>

#include "api/analysis_json.hpp"
#include "api/argument_checks.hpp"
#include "api/argument_error.hpp"

namespace roundscope::api {
namespace {

void check_threads(const AnalysisInput& input) { check_in("threads", input.threads, ranges::threads); }

std::int64_t as_int(std::uint64_t x) { return static_cast<std::int64_t>(std::min<std::uint64_t>(x, INT64_MAX)); }

std::vector<emu::KvOrder> orders_of(const std::string& s) {
    if (s == "both") return {emu::KvOrder::forward, emu::KvOrder::reverse};
    if (s == "forward") return {emu::KvOrder::forward};
    if (s == "reverse") return {emu::KvOrder::reverse};
    throw ArgumentError("order", fmt::format("'{}' is not one of forward|reverse|both", printable(s)));
}

}  // namespace

Answer<analysis::HeadroomResult> headroom(const HeadroomRequest& request) {
    const AnalysisInput& in = request.input;
    check_threads(in);
    const ChosenInputs c = choose_inputs("headroom", in.source, in.problem);
    analysis::HeadroomOptions o;
    o.threads = in.threads, o.causal = c.causal, o.softmax_scale = c.softmax_scale;
    analysis::HeadroomResult r = naming_input(in.source, [&] { return analysis::headroom(c.in, o); });
    nlohmann::json j = headroom_json(r, true);
    return {std::move(r), std::move(j)};
}

analysis::PCollapseOptions pcollapse_options(const PCollapseRequest& request) {
    const AnalysisInput& in = request.input;
    check_threads(in);
    analysis::PCollapseOptions o;
    o.recipe = recipe_of(request.recipe);
    o.orders = orders_of(request.order);
    check_in("k_sink", in.source.spec.k_sink, ranges::k_sink);
    o.k_sink = in.source.spec.k_sink;
    o.threads = in.threads;
    if (!request.scales.empty()) {
        o.scales.clear();
        for (const double s : request.scales) {
            check_in("scale", s, ranges::p_scale);
            o.scales.push_back(static_cast<float>(s));
        }
    }
    if (request.sweep_scale) o.scales = {1, 2, 3, 4, 6, 8, 16, 32, 64, 96, 128, 192, 256, 320, 384, 448, 512, 1024};
    // a recipe that scales P by its max offset (h100-fp8) reaches the powers of two: its sweep
    // takes those, and a given S must be one
    if (request.sweep_scale)
        std::erase_if(o.scales, [&](float s) { return !analysis::p_scale_reachable(o.recipe, s); });
    for (const float s : o.scales)
        if (!analysis::p_scale_reachable(o.recipe, s))
            throw ArgumentError("scale", fmt::format("recipe '{}' scales P by its max offset (max_offset): S must "
                                                     "be 2^k with k in [0, 30], not {}",
                                                     o.recipe.name, s));
    o.without_sink = request.without_sink;
    if (in.source.synthetic) {
        check_in("sink_strength", in.source.spec.sink_strength, ranges::sink_strength);
        o.sink_strength = in.source.spec.sink_strength;
    }
    return o;
}

Answer<analysis::PCollapseResult> pcollapse(const PCollapseRequest& request) {
    const AnalysisInput& in = request.input;
    analysis::PCollapseOptions o = pcollapse_options(request);
    validate("pcollapse", in.source);
    if (in.source.synthetic && static_cast<std::uint64_t>(o.k_sink) >= in.source.spec.n)
        throw ArgumentError("k_sink", fmt::format("{} sink tokens leave none of the N = {} keys to measure", o.k_sink,
                                                  in.source.spec.n));
    const ChosenInputs c = choose_inputs("pcollapse", in.source, in.problem);
    if (static_cast<std::uint64_t>(o.k_sink) >= c.in.n_kv)
        throw ArgumentError("k_sink", fmt::format("{} sink tokens leave none of the file's Nk = {} keys to measure",
                                                  o.k_sink, c.in.n_kv));
    o.causal = c.causal, o.softmax_scale = c.softmax_scale;
    analysis::PCollapseResult r = naming_input(in.source, [&] { return analysis::pcollapse(c.in, o); });
    nlohmann::json j = pcollapse_json(r, request.sweep_scale);
    j["recipe"] = o.recipe.name, j["k_sink"] = o.k_sink;
    if (o.sink_strength) j["sink_strength"] = *o.sink_strength;
    return {std::move(r), std::move(j)};
}

Answer<analysis::LeakResult> leak(const LeakRequest& request) {
    const AnalysisInput& in = request.input;
    check_threads(in);
    analysis::LeakOptions o;
    o.recipe = recipe_of(request.recipe);
    o.format = request.format == "none"
                   ? nullptr
                   : for_argument("format", [&] { return &emu::block_format_named(request.format); });
    check_in("block", request.block, ranges::block);
    check_in("max_tokens", as_int(request.max_tokens), ranges::max_tokens);
    o.block = request.block, o.fix = request.fix, o.max_tokens = request.max_tokens, o.threads = in.threads;
    o.natural = request.natural;
    // Leakage is a property of causal attention: the mask is always on.
    if (in.problem.causal == false) throw ArgumentError("causal", "leakage is measured under the causal mask");
    ProblemChoice causal = in.problem;
    causal.causal = true;
    const ChosenInputs c = choose_inputs("leak", in.source, causal);
    o.softmax_scale = c.softmax_scale;
    analysis::LeakResult r = naming_input(in.source, [&] { return analysis::leak(c.in, o); });
    nlohmann::json j = leak_json(r);
    return {std::move(r), std::move(j)};
}

namespace {

// Every file read and checked before the first step is analysed: a bad last file must not
// cost the work on the others, nor print half a report.
void check_step_files(const std::vector<AttentionSource>& files) {
    std::optional<bool> has_x;
    for (const AttentionSource& f : files) {
        const emu::AttentionInputs in = naming_input(f, [&] { return emu::find_attention_inputs(f.read()); });
        if (!in.d_o) throw Error(f.name + ": needs the tensor 'do' (the gradient of o)");
        if (has_x && *has_x != in.x.has_value())
            throw Error(f.name + ": " + (in.x ? "has" : "lacks") + " the layer input 'x', unlike " +
                        files.front().name);
        has_x = in.x.has_value();
    }
}

}  // namespace

Answer<analysis::BiasSteps> bias(const BiasRequest& request) {
    const AnalysisInput& in = request.input;
    const analysis::SyntheticSpec& spec = in.source.spec;
    check_threads(in);
    if (in.source.synthetic == !request.files.empty())
        throw Error("bias: give input files or synthetic inputs, not both");
    validate(in.problem);
    analysis::BiasOptions o;
    o.recipe = recipe_of(request.recipe);
    o.threads = in.threads;
    std::size_t count = request.files.size();
    analysis::BiasStepSource source = [&request](std::size_t i) {
        const AttentionSource& f = request.files[i];
        return naming_input(f, [&] {
            return analysis::BiasStepInput{f.name, f.name, emu::find_attention_inputs(f.read())};
        });
    };
    if (in.source.synthetic) {
        validate("bias", in.source);
        check_in("steps", as_int(request.steps), ranges::steps);
        check_in("tie_gap", spec.tie_gap, ranges::tie_gap);
        check_in("tied_keys", as_int(spec.tied_keys), ranges::tied_keys);
        check_in("d_model", as_int(spec.d_model), ranges::d_model);
        if (spec.d_model == 1) throw ArgumentError("d_model", "the layer input needs M >= 2 features (0: none)");
        if (spec.tied_keys >= spec.n)
            throw ArgumentError("tied_keys", fmt::format("{} leading keys leave none of the N = {} keys behind them",
                                                         spec.tied_keys, spec.n));
        check_synthetic_memory(spec);
        count = request.steps, source = analysis::synthetic_bias_steps(spec);
    } else {
        check_step_files(request.files);
    }
    const analysis::BiasStepSource masked = [&](std::size_t i) {
        analysis::BiasStepInput step = source(i);
        apply_problem(step.inputs, in.problem);
        return step;
    };
    analysis::BiasSteps s = analysis::bias_over_steps(count, masked, o, request.fix);
    nlohmann::json j = bias_steps_json(s);
    if (in.source.synthetic) j["tie_gap"] = spec.tie_gap, j["tied_keys"] = spec.tied_keys;
    return {std::move(s), std::move(j)};
}

Answer<analysis::AttributeResult> attribute(const AttributeRequest& request) {
    const AnalysisInput& in = request.input;
    check_threads(in);
    analysis::AttributeOptions o;
    o.recipe = recipe_of(request.recipe);
    o.threads = in.threads;
    const ChosenInputs c = choose_inputs("attribute", in.source, in.problem);
    o.causal = c.causal, o.softmax_scale = c.softmax_scale;
    analysis::AttributeResult r = naming_input(in.source, [&] { return analysis::attribute(c.in, o); });
    nlohmann::json j = attribute_json(r);
    return {std::move(r), std::move(j)};
}

}  // namespace roundscope::api
