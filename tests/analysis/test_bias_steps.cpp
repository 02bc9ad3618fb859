// bias_over_steps (analysis/bias_steps.hpp): each step is rounding_bias on that step's inputs,
// the cumulative coefficient is their running sum, the fixes are the paper's two, and a step
// that disagrees with the first about x is refused naming it; the signs across steps, and the
// regime of tied keys where the bias acts.
#include <catch2/catch.hpp>

#include <cmath>

#include "analysis/bias_steps.hpp"
#include "lib/error.hpp"

using namespace roundscope;
using namespace roundscope::analysis;

namespace {

SyntheticSpec small_repeated_max(std::uint64_t d_model) {
    SyntheticSpec spec;
    spec.scenario = Scenario::repeated_max, spec.n = 96, spec.d = 16, spec.heads = 2, spec.seed = 5;
    spec.d_model = d_model;
    return spec;
}

}  // namespace

TEST_CASE("Bias over steps: each step is that seed's rounding_bias, and the coefficients accumulate", "[bias]") {
    const SyntheticSpec spec = small_repeated_max(32);
    BiasOptions o;
    o.recipe = emu::find_recipe("fa2-bf16");
    const BiasSteps s = bias_over_steps(3, synthetic_bias_steps(spec), o, true);
    REQUIRE(s.steps.size() == 3);
    REQUIRE(s.cumulative_coefficient.size() == 3);
    double running = 0;
    for (std::size_t i = 0; i < 3; ++i) {
        SyntheticSpec step = spec;
        step.seed = spec.seed + i;
        const emu::AttentionInputs in = synthetic_attention(step);
        const BiasResult alone = rounding_bias(in, o);
        CHECK(s.steps[i].result.coefficient_sum == alone.coefficient_sum);
        CHECK(s.steps[i].result.positive_rows == alone.positive_rows);
        running += alone.coefficient_sum;
        CHECK(s.cumulative_coefficient[i] == running);
        REQUIRE(s.steps[i].fixes.has_value());
        CHECK(s.steps[i].fixes->max_adjust.coefficient_sum ==
              rounding_bias(in, with_max_adjustment(o)).coefficient_sum);
        CHECK(s.steps[i].fixes->delta_from_f32_o.recipe == "fa2-bf16 with delta from float32 O");
        CHECK(s.steps[i].fixes->max_adjust.p_bar_one_count == 0);
    }
    CHECK(s.query_weight.cumulative_norm().size() == 3);
    CHECK(s.query_weight.coherence() > 0);
    CHECK(s.query_weight.coherence() <= 1 + 1e-12);
}

TEST_CASE("Bias over steps: a step without x after one with it is refused, naming its file", "[bias]") {
    BiasOptions o;
    o.recipe = emu::find_recipe("fa2-bf16");
    const BiasStepSource mixed = [](std::size_t i) {
        const emu::AttentionInputs in = synthetic_attention(small_repeated_max(i == 0 ? 32 : 0));
        return BiasStepInput{"step.safetensors", "step.safetensors", in};
    };
    CHECK_THROWS_WITH(bias_over_steps(2, mixed, o, false),
                      Catch::Contains("step.safetensors") && Catch::Contains("lacks the layer input 'x'"));
    const BiasSteps one = bias_over_steps(1, mixed, o, false);
    CHECK(one.steps.size() == 1);
    CHECK_FALSE(one.steps[0].fixes.has_value());
}

TEST_CASE("Step signs: counts and the exact two-sided sign test, zero steps left out", "[bias]") {
    const StepSigns all = step_signs({1, 2, 3, 4, 5, 6, 7, 8});
    CHECK(all.positive == 8);
    CHECK(all.negative == 0);
    CHECK(all.p_value == Approx(2.0 / 256).epsilon(1e-12));
    const StepSigns split = step_signs({1, -1, 2, -2, 0});
    CHECK(split.positive == 2);
    CHECK(split.negative == 2);
    CHECK(split.p_value == 1);
    // 9 of 10: P(X <= 1) = 11 / 1024, doubled
    CHECK(step_signs({1, 1, 1, 1, 1, 1, 1, 1, 1, -1}).p_value == Approx(22.0 / 1024).epsilon(1e-12));
    CHECK(step_signs({}).p_value == 1);
    CHECK(step_signs({0, 0}).positive == 0);
}

TEST_CASE("Bias over steps: the tie regime and the paper's fixes under the PyTorch recipe", "[bias]") {
    // Two tied keys G above 510 competitors (N = 512). At G = 8 the rest of the row holds about
    // 16 % of its P-bar mass, no row is dominated and the coefficient stays small; at G = 14
    // most rows are, every step is positive and the sum is tens of times larger. The max adjustment removes every P-bar
    // = 1; delta from an O recomputed in float32 leaves only float32 rounding in delta.
    SyntheticSpec spec;
    spec.scenario = Scenario::repeated_max, spec.n = 512, spec.d = 64, spec.heads = 2;
    BiasOptions o;
    o.recipe = emu::find_recipe("fa2-bf16-torch");
    spec.tie_gap = 8;
    const BiasSteps low = bias_over_steps(4, synthetic_bias_steps(spec), o, false);
    spec.tie_gap = 14;
    const BiasSteps high = bias_over_steps(4, synthetic_bias_steps(spec), o, true);
    for (std::size_t i = 0; i < 4; ++i) {
        const BiasResult& a = low.steps[i].result;
        const BiasResult& b = high.steps[i].result;
        CHECK(a.tied_rows == a.rows);
        CHECK(a.tie_dominated_rows == 0);
        CHECK(a.tie_share_mean < 0.9);
        CHECK(b.tied_rows == b.rows);
        CHECK(b.tie_dominated_rows > b.rows / 2);
        CHECK(b.tie_share_mean > 0.999);
        CHECK(b.coefficient_sum > 5);
        REQUIRE(b.head_ties.size() == 2);  // head by head, adding up to the whole
        CHECK(b.head_ties[0].tied_rows + b.head_ties[1].tied_rows == b.tied_rows);
        CHECK(b.head_ties[0].tie_dominated_rows + b.head_ties[1].tie_dominated_rows == b.tie_dominated_rows);
        CHECK((b.head_ties[0].tie_share_mean + b.head_ties[1].tie_share_mean) / 2 == Approx(b.tie_share_mean));
        const BiasFixResults& f = *high.steps[i].fixes;
        CHECK(f.max_adjust.tied_rows == 0);
        CHECK(f.max_adjust.p_bar_one_count == 0);
        CHECK(std::fabs(f.delta_from_f32_o.coefficient_sum) < 1e-3);
    }
    CHECK(high.signs.positive == 4);
    CHECK(high.signs.p_value == Approx(0.125));
    CHECK(std::fabs(low.cumulative_coefficient.back()) < high.cumulative_coefficient.back() / 5);
    REQUIRE(high.max_adjust_signs.has_value());
    REQUIRE(high.delta_from_f32_o_signs.has_value());
    CHECK_FALSE(low.max_adjust_signs.has_value());
}
