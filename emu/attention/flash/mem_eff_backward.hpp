#pragma once
// PyTorch's memory-efficient attention backward (xformers' CUTLASS kernel, aten/.../mem_eff_attention/
// kernel_backward.h and attention_backward.cu, as PyTorch calls it on sm_80 and newer): which
// blocks run in which order. One thread block per key block (split keys) walks its query blocks,
// keeping dK and dV in registers; dQ of a query block is one float32 chain over the key blocks,
// handed from one split to the next through a locked buffer.
#include <cstdint>
#include <vector>

#include "emu/attention/inputs/attention_mask.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"

namespace roundscope::emu {

struct MemEffBackwardPlan {
    int block_i = 0, block_j = 0;  // queries x keys a tile (kBlockSizeI x kBlockSizeJ)
    int splits = 1;                // num_splits_key: thread blocks over the keys
    int delta_threads = 0;         // computeDelta's threads a row (kNumThreads / kBlockSizeI)
    // For each key block, its query blocks in the order its split visits them (dK, dV chain
    // over them in this order); for each query block, the key blocks in the order they reach it
    // (dQ's chain). Blocks a causal mask hides entirely are left out.
    std::vector<std::vector<std::uint64_t>> queries_of_key_block, key_blocks_of_query;
};

/// The plan for `heads` (batch x heads) of n_q queries and n_kv keys at head dimension d, causal
/// (aligned as `alignment` says: the kernel's CausalFromTopLeft, which SDPA's is_causal passes,
/// or CausalFromBottomRight, a lower-right causal bias) or not. Error naming the recipe for D
/// above 64 (another kernel, not modelled).
MemEffBackwardPlan mem_eff_backward_plan(const AttentionRecipe& recipe, std::uint64_t heads, std::uint64_t n_q,
                                         std::uint64_t n_kv, std::uint64_t d, bool causal, Alignment alignment);

/// Where dQ is one of several the GPU can give: more than one split adds to a query block's dQ,
/// in the order the splits take its lock, which the GPU does not fix (the plan takes them in the
/// order they reach the block). Empty where dQ is determined, else one line saying why.
std::string mem_eff_dq_note(const MemEffBackwardPlan& plan);

}  // namespace roundscope::emu
