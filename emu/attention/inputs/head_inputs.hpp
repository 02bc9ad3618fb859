#pragma once
// One head of a layer's inputs as inputs of their own ([N, D] tensors, batch 1, one head), so
// that analyses run head by head, in parallel, and report per head (`roundscope report`).
// q, k, v, o, do and lse are zero-copy views of the head's rows (k and v its key-value head's);
// the mask is the head's view of it; x is the head's batch entry; wq keeps only the head's D columns.
#include <cstdint>

#include "emu/attention/inputs/attention_inputs.hpp"

namespace roundscope::emu {

/// The number of heads of `in`, batches included (B * H).
inline std::uint64_t head_count(const AttentionInputs& in) { return in.batch * in.heads; }

/// Head `head` (flattened over [B, H], below head_count) of `in`, with its key-value head.
AttentionInputs head_inputs(const AttentionInputs& in, std::uint64_t head);

/// The query heads that share key-value head `kv_head` (flattened over [B, Hkv]) with it: [G, N,
/// D] query tensors over [1, N, D] keys and values (G = kv_group(in); views), its dK and dV the
/// sums over the group's heads. Without grouped-query attention, head_inputs(in, kv_head).
AttentionInputs group_inputs(const AttentionInputs& in, std::uint64_t kv_head);

/// `in` with k and v repeated to every query head (kv_heads = heads): the same forward pass,
/// head by head, for the analyses that index k and v by query head. `in` itself without
/// grouped-query attention.
AttentionInputs kv_per_query_head(const AttentionInputs& in);

}  // namespace roundscope::emu
