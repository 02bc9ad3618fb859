#pragma once
// Whether a recipe's backward pass is modelled for one shape: backward_refusal(recipe)
// (flash_attention.hpp) and, where the recipe's backward covers some shapes only (ATen's CPU
// kernel, aten_cpu_backward.hpp), the shape's own limits. compare uses it to fall back to the
// forward outputs of a dump with gradients.
#include <string>

#include "emu/attention/flash/flash_attention.hpp"

namespace roundscope::emu {

/// Why the recipe's backward pass is not modelled for this shape, in one sentence naming the
/// recipe; empty where flash_backward runs it. A shape the forward refuses throws its Error.
std::string backward_refusal(const AttentionRecipe& recipe, const AttentionShape& shape);

}  // namespace roundscope::emu
