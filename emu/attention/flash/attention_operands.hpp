#pragma once
// From the tensors of a file (emu/attention/inputs/attention_inputs.hpp) to the emulator's operands: every
// element rounded once (nearest even) into the recipe's input format, heads flattened.
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"

namespace roundscope::emu {

/// The shape of `in` with the mask and scale given (scale 0: 1/sqrt(D) rounded to float32).
AttentionShape attention_shape_of(const AttentionInputs& in, bool causal, double scale);

/// q, k, v (and dO when `with_d_o`) in `input`. Throws Error naming the tensor for a NaN or
/// Inf element, or for a missing dO.
AttentionOperands attention_operands(const AttentionInputs& in, const Format& input, bool with_d_o);

}  // namespace roundscope::emu
