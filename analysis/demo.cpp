#include "analysis/demo.hpp"

namespace roundscope::analysis {
namespace {

// Tie gaps outside and inside the regime where the tie decides the rounding (about 12 and up at
// N = 512, docs/findings.md).
constexpr double bias_tie_gaps[] = {8, 14};
constexpr std::size_t bias_step_count = 8;

void run_pcollapse(DemoReport& r, int threads) {
    SyntheticSpec& spec = r.pcollapse_scenario;
    spec.scenario = Scenario::sink, spec.n = 1024, spec.d = 64, spec.sink_strength = 8;
    PCollapseOptions o;
    o.recipe = emu::find_recipe("fp8-forward-order");
    o.sink_strength = spec.sink_strength, o.threads = threads;
    r.pcollapse = pcollapse(synthetic_attention(spec), o);
}

DemoReport::BiasRegime summarized(DemoReport::BiasRegime b) {
    std::uint64_t dominated = 0, tied = 0;
    for (const BiasStep& step : b.steps.steps) {
        b.tie_share += step.result.tie_share_mean / static_cast<double>(b.steps.steps.size());
        dominated += step.result.tie_dominated_rows, tied += step.result.tied_rows;
        b.max_adjust_sum += step.fixes->max_adjust.coefficient_sum;
        b.delta_from_f32_o_sum += step.fixes->delta_from_f32_o.coefficient_sum;
    }
    b.dominated_share = tied > 0 ? static_cast<double>(dominated) / static_cast<double>(tied) : 0.0;
    return b;
}

void run_bias(DemoReport& r, int threads) {
    SyntheticSpec& spec = r.bias_scenario;
    spec.scenario = Scenario::repeated_max, spec.n = 512, spec.d = 64, spec.heads = 2;
    r.bias_recipe = "fa2-bf16-torch";
    BiasOptions o;
    o.recipe = emu::find_recipe(r.bias_recipe);
    o.threads = threads;
    for (const double gap : bias_tie_gaps) {
        SyntheticSpec at = spec;
        at.tie_gap = gap;
        r.bias.push_back(summarized({gap, bias_over_steps(bias_step_count, synthetic_bias_steps(at), o, true)}));
    }
    spec.tie_gap = bias_tie_gaps[0];
}

void run_leak(DemoReport& r, int threads) {
    SyntheticSpec& spec = r.leak_scenario;
    spec.n = 128, spec.d = 64;
    const emu::AttentionInputs in = synthetic_attention(spec);
    r.leak_recipe = "mxfp4-v";
    LeakOptions o;
    o.recipe = emu::find_recipe(r.leak_recipe);
    o.threads = threads;
    r.leak = leak(in, o);
    o.fix = true;
    r.leak_fixed = leak(in, o);
}

void run_headroom(DemoReport& r, int threads) {
    SyntheticSpec& spec = r.headroom_scenario;
    spec.scenario = Scenario::wide, spec.n = 256, spec.d = 64, spec.spread = 1.8;
    HeadroomOptions o;
    o.threads = threads;
    r.headroom = headroom(synthetic_attention(spec), o);
}

}  // namespace

DemoReport run_demo(int threads) {
    DemoReport r;
    run_pcollapse(r, threads);
    run_bias(r, threads);
    run_leak(r, threads);
    run_headroom(r, threads);
    return r;
}

}  // namespace roundscope::analysis
