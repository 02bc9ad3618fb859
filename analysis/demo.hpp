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

    SyntheticSpec bias_scenario;   // two keys tie for the max; x and W^Q with it
    std::vector<BiasResult> bias;  // the bias recipes, each also with the max adjustment
    std::string bias_steps_recipe;
    BiasSteps bias_steps;  // that recipe over independent synthetic steps

    SyntheticSpec leak_scenario;   // random scores, causal
    std::string leak_recipe;       // V block-quantized along tokens
    LeakResult leak, leak_fixed;   // without and with the unquantized diagonal block

    SyntheticSpec headroom_scenario;  // wide scores
    HeadroomResult headroom;
};

DemoReport run_demo(int threads);

}  // namespace roundscope::analysis
