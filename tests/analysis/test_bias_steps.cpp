// bias_over_steps (analysis/bias_steps.hpp): each step is rounding_bias on that step's inputs,
// the cumulative coefficient is their running sum, the fixes are the paper's two, and a step
// that disagrees with the first about x is refused naming it.
#include <catch2/catch.hpp>

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
