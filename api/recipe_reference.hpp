#pragma once
// The recipe keys and what each kernel runs, as `roundscope recipes` prints them: a Markdown
// reference (docs/recipe-keys.md is its output, checked for freshness by the recipe_keys_doc
// test) and JSON (`recipes --json`'s key_table and kernels).
#include <nlohmann/json.hpp>
#include <string>

namespace roundscope::api {

/// docs/recipe-keys.md, byte for byte.
std::string recipe_reference_markdown();

/// [{"key", "stage", "accepts", "meaning", "default", "values", "domain"}], in the settings table's
/// order; domain: {"kind": "enum", "values"}, {"kind": "integer", "min", "max", "step", "also"} or
/// {"kind": "positive_float32"}.
nlohmann::json recipe_key_table_json();

/// [{"kernel", "title", "backward", "keys": {KEY: {"runs": [...], "in_words", "why"}}}].
nlohmann::json kernel_capabilities_json();

}  // namespace roundscope::api
