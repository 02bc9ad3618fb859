#pragma once
// One head of a layer's inputs as inputs of their own ([N, D] tensors, batch 1, one head), so
// that analyses run head by head, in parallel, and report per head (`roundscope report`).
// q, k, v, o, do, lse and a per-head bias are zero-copy views of the head's rows; a shared bias
// stays shared; x is the head's batch entry; wq keeps only the head's D columns.
#include <cstdint>

#include "emu/attention/attention_inputs.hpp"

namespace roundscope::emu {

/// The number of heads of `in`, batches included (B * H).
inline std::uint64_t head_count(const AttentionInputs& in) { return in.batch * in.heads; }

/// Head `head` (flattened over [B, H], below head_count) of `in`.
AttentionInputs head_inputs(const AttentionInputs& in, std::uint64_t head);

}  // namespace roundscope::emu
