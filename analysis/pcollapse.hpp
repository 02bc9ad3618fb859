#pragma once
// P-collapse in FP8 attention (arXiv:2606.06521): P is scaled by a static S and cast
// to E4M3 before P V; E4M3's smallest subnormal is 2^-9, so P S <= 2^-10 becomes zero, and with
// forward KV order the attention sink sets the running max before the other blocks are cast:
// to leading order a fraction Phi(Delta + delta_k - ln(1024) - ln S) of the non-sink P values
// underflows. Reverse KV order (the sink block last) and S = 2^8 remove it. The prediction
// comes from the scores the kernel sees (analysis/collapse_model.hpp), head by head.
#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/collapse_model.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"

namespace roundscope::emu {
class RunCache;  // emu/attention/flash/run_cache.hpp
}

namespace roundscope::analysis {

class TruthCache;  // analysis/truth_cache.hpp

struct PCollapseOptions {
    emu::AttentionRecipe recipe;  // the CLI's default: fp8-p-cast-only; kv_order and p_scale are swept
    std::vector<emu::KvOrder> orders{emu::KvOrder::forward, emu::KvOrder::reverse};
    std::vector<float> scales{1, 256};
    int k_sink = 4;                       // the first k_sink keys are the sink (not counted)
    std::optional<double> sink_strength;  // the nominal Delta, when known (synthetic inputs): reported only
    bool causal = false;
    double softmax_scale = 0;
    int threads = 0;
    TruthCache* truths = nullptr;   // shared with the other analyses of these inputs (the report)
    emu::RunCache* runs = nullptr;  // S shared the same way
    // Also each run with every sink key replaced by its neighbour (key k_sink): the underflow the
    // spread of the other scores causes alone; the rest of the measured underflow is the sink's.
    bool without_sink = false;
};

struct PCollapseRun {
    emu::KvOrder order;
    float scale;
    double underflow_fraction;                          // non-sink P with P S cast to zero
    std::optional<double> underflow_without_sink;       // the same with the sink keys replaced (without_sink)
    double predicted_fraction;                          // the normal model of collapse_model.hpp
    double predicted_fraction_empirical;                // the held scores counted (collapse_model.hpp)
    std::optional<double> closed_form_fraction;         // forward order: Phi((Delta - 6.93 - ln S) / sigma + delta_k)
                                                        // with each head's effective Delta and spread sigma
    std::optional<double> predicted_fraction_averaged;  // forward order: the closed form averaged over the
                                                        // distribution of the max of k_sink normals
    double delta_c;                                     // 6.93 + ln S - delta_k
    double mse;                                         // mean squared error of O against the truth
    std::optional<double> mse_gain_over_forward;        // reverse order: forward's MSE at this S over this one
    std::uint64_t saturated;                            // P S cast at (or past) E4M3's 448
    std::uint64_t counted;                              // non-sink P values (the fraction's denominator)
};

/// One head's measured sink and its runs (in the order of PCollapseResult::runs).
struct PCollapseHead {
    std::uint64_t head;                             // flattened [B, H] index
    double sink_strength, score_spread, sink_mass;  // collapse_model.hpp
    struct Run {
        double underflow_fraction, predicted_fraction, predicted_fraction_empirical;
        std::uint64_t counted;
        std::optional<double> underflow_without_sink;
        std::optional<double> closed_form_fraction;  // forward order, a head with a sink: the paper's closed
                                                     // form from this head's effective Delta and spread
    };
    std::vector<Run> runs;
    std::vector<std::uint64_t> score_gaps, p_binades;  // its profile (collapse_model.hpp)
    std::vector<double> sink_mass_sums;                // by position (collapse_model.hpp)
    std::vector<std::uint64_t> position_rows;
    std::uint64_t problem_rows = 0;
    std::vector<CollapsingRow> collapsing_rows;  // orders[0], scales[0]
};

struct PCollapseResult {
    double delta_k;        // the expected maximum of k_sink standard normals
    double sink_strength;  // the effective Delta, mean over heads
    double score_spread;   // mean over heads
    double sink_mass;      // mean over heads
    std::vector<PCollapseRun> runs;
    std::vector<PCollapseHead> heads;
    std::vector<std::uint64_t> score_gaps, p_binades;  // the heads' profiles added
    const emu::Format* p_format = &emu::e4m3;          // what P S was cast to (the recipe's)
    std::vector<double> sink_mass_sums;                // the heads' added
    std::vector<std::uint64_t> position_rows;
    std::uint64_t problem_rows = 0;
    std::vector<CollapsingRow> collapsing_rows;  // the heads' most collapsing rows
};

PCollapseResult pcollapse(const emu::AttentionInputs& in, const PCollapseOptions& options);

/// Whether P can be cast at S under `recipe`: any S > 0 by p_scale, or, where the recipe offsets
/// its max (max_offset, FlashAttention-3's FP8), S = 2^k with k in [0, 30], set as the offset.
bool p_scale_reachable(const emu::AttentionRecipe& recipe, float s);

/// E[max of k standard normals] (1.0294 for k = 4), by numerical integration.
double expected_normal_maximum(int k);

/// What a static scale S means on the P format's grid (the --sweep-scale table; E4M3 below):
/// whether it scales exactly (a power of two); whether it saturates, S above 448, so that every
/// row's largest P (P-bar = 1 at its running max) is clipped, an error of 1 - 448 / S on the
/// weight that matters most; the octaves of P that land in the normal range below 448, none for
/// a saturating S (its extra octaves at the bottom do not repay the clipped top, so it must not
/// rank above S = 256); and arXiv:2606.06521's dp(S): the grid's step just below S (where P near
/// 1 lands) in units of P, a sawtooth between 2^-4 (S a power of two, its lower envelope) and
/// 2^-3 (S just above one); 448 gives 32 / 448 = 1/14.
struct ScaleProperties {
    float scale;
    bool exact;
    bool saturates;
    double normal_octaves;
    double dp;
};
ScaleProperties scale_properties(float s, const emu::Format& p_format = emu::e4m3);

}  // namespace roundscope::analysis
