#pragma once
// `roundscope demo`: one synthetic scenario per failure the research describes, every pass run
// on it. Sizes are chosen to finish in seconds on two cores.
#include <vector>

#include "analysis/headroom.hpp"
#include "analysis/leak.hpp"
#include "analysis/pcollapse.hpp"
#include "analysis/rounding_bias.hpp"

namespace roundscope::analysis {

struct DemoReport {
    PCollapseResult pcollapse;     // sink head, Delta = 8, N = 1024: both orders, S = 1 and 256
    std::vector<BiasResult> bias;  // fa2-bf16, fa2-bf16-o-bf16, fa2-bf16-torch, each also with the max adjustment
    std::vector<double> bias_cumulative;  // fa2-bf16-o-bf16's coefficient summed over 8 synthetic steps
    QueryWeightSteps bias_query_weight;   // and its dW^Q error (x with M = 256, q = x W^Q)
    LeakResult leak, leak_fixed;          // MXFP4 V, causal, N = 128
    HeadroomResult headroom;              // scores with standard deviation 3.2, N = 256
};

DemoReport run_demo(int threads);

}  // namespace roundscope::analysis
