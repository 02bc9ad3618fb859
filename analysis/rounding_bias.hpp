#pragma once
// BF16 rounding bias in flash-attention backward (Qiu & Yao, arXiv:2510.04212):
// delta = rowsum(dO * O) formed from the kernel's O_lp instead of the exact O carries an error
// of one sign when P-bar = 1 for several keys and V is mostly negative, because the low-
// precision sums of those V rows round the same way every time. The gradient error of W^Q is
// a sum over rows of (delta_lp - delta_hp)[T] times nearly equal rank-1 matrices, so the sum of
// the coefficients (coefficient_sum) is what accumulates across steps.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/query_weight_error.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"

namespace roundscope::emu {
class RunCache;  // emu/attention/flash/run_cache.hpp
}

namespace roundscope::analysis {

class TruthCache;  // analysis/truth_cache.hpp

struct BiasOptions {
    emu::AttentionRecipe recipe;  // default fa2-bf16
    bool use_stored_o = true;     // take O_lp from the file's 'o' when it has one
    bool causal = false;
    double softmax_scale = 0;
    int top = 5;  // feature dimensions reported
    int threads = 0;
    TruthCache* truths = nullptr;   // shared with the other analyses of these inputs (the report)
    emu::RunCache* runs = nullptr;  // S shared the same way
};

struct DimContribution {
    std::uint64_t dim;
    double contribution;               // sum over rows of dO[T, j] (O_lp - O_hp)[T, j]
    double o_error_negative_fraction;  // rows with (O_lp - O_hp)[T, j] < 0
    double v_negative_fraction;        // keys with V[., j] < 0
};

/// One head's rows whose tied keys hold their row (BiasResult's tie fields, head by head).
struct HeadTies {
    std::uint64_t tied_rows = 0, tie_dominated_rows = 0;
    double tie_share_mean = 0;
    std::uint64_t one_key_rows = 0;
};

struct BiasResult {
    std::string recipe;
    std::uint64_t rows = 0;
    double coefficient_sum = 0;            // sum over rows of delta_lp - delta_hp
    std::uint64_t positive_rows = 0;       // rows with delta_lp > delta_hp
    double t_statistic = 0;                // mean / (sd / sqrt(rows)) of delta_lp - delta_hp: the rows
                                           // share their keys, so they are not independent samples
    std::uint64_t p_bar_one_count = 0;     // P-bar entries that are 1 after the cast to P's format
    std::uint64_t repeated_max_rows = 0;   // rows whose largest score two or more keys reach
    std::uint64_t tied_rows = 0;           // rows with two or more keys of cast P-bar 1 (online softmax)
    std::uint64_t tie_dominated_rows = 0;  // ... whose tied keys hold more than 1 - 2^-9 of the P-bar mass
    double tie_share_mean = 0;             // the tied keys' share of their row's P-bar mass, over tied rows
    std::uint64_t one_key_rows = 0;   // rows one key of P-bar 1 holds past 1 - 2^-9, not all (l = 1 + e rounds to 1)
    std::vector<HeadTies> head_ties;  // the same per head (flattened [B, H])
    std::vector<DimContribution> top_dims;  // by |contribution|
    bool o_from_file = false;
    std::optional<QueryWeightError> query_weight;  // with x in the inputs
};

/// One input (one training step): q, k, v, do (and o, as the kernel stored it; x and wq for the
/// query-weight error).
BiasResult rounding_bias(const emu::AttentionInputs& in, const BiasOptions& options);

}  // namespace roundscope::analysis
