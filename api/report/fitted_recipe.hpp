#pragma once
// The recipe `roundscope fit --json` found for a kernel, read back for the report to compare
// against (`report --fitted FIT.json`): the kernel's nearest recipe beside the presets.
#include <string>

#include "emu/attention/recipe/attention_recipe.hpp"

namespace roundscope::api {

/// The name the report gives the fitted recipe.
inline constexpr const char* fitted_recipe_name = "fitted";

/// Fit's best candidate in the file at `path` (its "best": {"preset", "settings": {KEY: VALUE}}),
/// named fitted_recipe_name. ArgumentError naming "fitted" for anything else: no such regular
/// file, a file over 16 MiB, not JSON, no best candidate, an unknown preset, key or value.
emu::AttentionRecipe fitted_recipe(const std::string& path);

}  // namespace roundscope::api
