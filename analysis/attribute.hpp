#pragma once
// Where a recipe's error comes from: the output's error against the truth (of the inputs as
// the kernel holds them) with one stage at a time in the recipe's low precision and the rest
// exact, and with one stage exact and the rest as the recipe has them. Stages: the score
// product, the softmax format (where the recipe keeps S, the row max and sum, or a naive
// softmax's arithmetic, below float32), the P cast (P times S to the P format), the P V
// product, the running O (where the recipe keeps it, and each block's P-bar V, below float32),
// the O cast; and delta, formed from the stored O against from the O before its final cast
// (float32; the running O keeps its format). "Exact" is float64
// arithmetic rounded once to float32 for the products, float32 for the rest.
#include <optional>
#include <string>
#include <vector>

#include "emu/attention/inputs/attention_inputs.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"

namespace roundscope::emu {
class RunCache;  // emu/attention/flash/run_cache.hpp
}

namespace roundscope::analysis {

class TruthCache;  // analysis/truth_cache.hpp

struct AttributeOptions {
    emu::AttentionRecipe recipe;
    bool causal = false;
    double softmax_scale = 0;
    int threads = 0;
    TruthCache* truths = nullptr;   // shared with the other analyses of these inputs (the report)
    emu::RunCache* runs = nullptr;  // S shared the same way
    bool stages = true;             // false: all_low, all_exact and delta only (two runs, not up to ten)
};

struct StageAttribution {
    std::string stage;
    // relative rms error of O; empty where no kernel could run that combination (a tensor core
    // takes no float32 P, so an exact P cast with the recipe's P V product has no meaning)
    std::optional<double> only_this_low, only_this_exact;
};

struct AttributeResult {
    std::string recipe;
    double all_low = 0, all_exact = 0;  // relative rms error of O
    std::vector<StageAttribution> stages;
    std::optional<double> delta_recipe, delta_from_f32_o;  // relative rms error of delta (with dO)
};

AttributeResult attribute(const emu::AttentionInputs& in, const AttributeOptions& options);

}  // namespace roundscope::analysis
