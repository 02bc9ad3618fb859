#pragma once
// `roundscope demo`: one synthetic scenario per failure the research describes, every pass run
// on it. Sizes are chosen to finish in seconds on two cores; each scenario's parameters travel
// with its result so that the report prints what was run.
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/bias_steps.hpp"
#include "analysis/headroom.hpp"
#include "analysis/leak.hpp"
#include "analysis/pcollapse.hpp"
#include "analysis/rounding_bias.hpp"
#include "analysis/synthetic_attention.hpp"

namespace roundscope::analysis {

struct DemoReport {
    SyntheticSpec pcollapse_scenario;  // a sink head
    PCollapseResult pcollapse;         // fp8-forward-order: both orders, S = 1 and 256

    // Two keys tie for the max, G above the rest, at a gap outside the regime where the bias
    // acts and one inside it: each over independent steps, with the paper's two fixes.
    SyntheticSpec bias_scenario;  // tie_gap: the first regime's
    std::string bias_recipe;      // the paper's released code
    struct BiasRegime {
        double tie_gap;
        BiasSteps steps;
        // Over the steps: the tied pair's mean share of its rows' P-bar, the share of tied rows it
        // holds more than 1 - 2^-9 of, and the delta errors summed under each fix.
        double tie_share = 0, dominated_share = 0, max_adjust_sum = 0, delta_from_f32_o_sum = 0;
    };
    std::vector<BiasRegime> bias;

    SyntheticSpec leak_scenario;  // random scores, causal
    std::string leak_recipe;      // V block-quantized along tokens
    LeakResult leak, leak_fixed;  // without and with the unquantized diagonal block

    SyntheticSpec headroom_scenario;  // wide scores
    HeadroomResult headroom;
};

DemoReport run_demo(int threads);

}  // namespace roundscope::analysis
