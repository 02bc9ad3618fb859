#pragma once
// What the library knows, as JSON: every number format with its parameters, and the recipes
// (presets, their settings, each key's reference and what each kernel runs).
#include <nlohmann/json.hpp>

namespace roundscope::api {

/// {"formats": [{"name", "bits", "exp_bits", "man_bits", "bias", "max", "min_normal",
/// "min_subnormal", "has_inf", "nan", "signed", "inf"}]}
nlohmann::json formats_json();

/// {"recipes": [{"name", "settings"}], "keys", "key_table", "kernels"}
nlohmann::json recipes_json();

}  // namespace roundscope::api
