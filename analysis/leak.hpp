#pragma once
// Future leakage of V block-quantized along tokens ("Future leakage in block-quantized attention"): with k tokens
// sharing a scale, the stored V[j] depends on V[j'] for j' > j in the same block, so causal attention at position i
// depends on tokens after i through the scale of its own (diagonal) block. The fix: the diagonal block of P multiplies
// unquantized V (recipe setting diagonal_fix).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "emu/attention/inputs/attention_inputs.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"

namespace roundscope::analysis {

struct LeakOptions {
    emu::AttentionRecipe recipe;                   // default mxfp4-v; v_quant, v_block and diagonal_fix from below
    const emu::BlockFormat* format = &emu::mxfp4;  // null: V unquantized (what Q, K or P quantization leak)
    int block = 32;
    bool fix = false;
    double softmax_scale = 0;
    std::uint64_t max_tokens = 512;  // the first tokens of a file (a causal prefix is a sequence)
    int threads = 0;
    // Also each future token j replaced by another, its K and V rows those of token (j + n / 2) mod n
    // (a natural change of token, where V[j] x 16 is the largest change a block's scale can see)
    bool natural = false;
};

struct LeakResult {
    std::string format;  // the block format of V, its tokens per scale, and whether the fix was on
    int block = 0;
    bool fix = false;
    std::uint64_t tokens = 0;
    std::uint64_t future_pairs = 0;                      // (head, i, j), j > i in i's V block
    std::uint64_t leaking_pairs = 0;                     // those where V[j] x 16 changes O[i]
    double max_future_influence = 0;                     // the largest |change of O[i]| that such a V[j] causes
    std::optional<std::uint64_t> leaking_pairs_natural;  // natural: where V[j] replaced by another token's
    std::optional<double> max_future_influence_natural;  //   changes O[i], and by how much at most
    double parallel_vs_autoregressive_max_abs_diff = 0;  // O[i] with all tokens vs with tokens 0..i
    std::uint64_t masked_contribution_violations = 0;    // rows whose O changes when only masked
                                                         // (future) keys and values change
    std::uint64_t mixed_scale_blocks = 0;                // (head, query) whose quantized V block mixes its
                                                         // visible and masked positions
    // Per query position i (the largest over heads): how far a later V[j] moves O[i], and
    // |O[i] parallel - O[i] autoregressive|. What the plot draws: a sawtooth over each V block.
    std::vector<double> future_influence_by_position, parallel_vs_autoregressive_by_position;
};

LeakResult leak(const emu::AttentionInputs& in, const LeakOptions& options);

}  // namespace roundscope::analysis
