#pragma once
// A recipe as a request names it: a preset and settings over it, checked where they are read.
#include <string>
#include <vector>

#include "emu/attention/recipe/attention_recipe.hpp"

namespace roundscope::api {

struct RecipeChoice {
    std::string name;                   // a preset (roundscope recipes); empty where a request needs one: refused
    std::vector<std::string> settings;  // KEY=VALUE, applied in order
};

/// The preset with its settings applied: ArgumentError naming `recipe` or `settings` for an
/// unknown name, key or value; an Error naming the recipe for a combination it cannot run.
emu::AttentionRecipe recipe_of(const RecipeChoice& choice);

}  // namespace roundscope::api
