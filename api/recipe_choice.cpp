#include "api/recipe_choice.hpp"

#include "api/argument_error.hpp"

namespace roundscope::api {

emu::AttentionRecipe recipe_of(const RecipeChoice& choice) {
    if (choice.name.empty()) throw ArgumentError("recipe", "a recipe is required (roundscope recipes)");
    emu::AttentionRecipe r = for_argument("recipe", [&] { return emu::find_recipe(choice.name); });
    for (const std::string& s : choice.settings) for_argument("settings", [&] { emu::apply_setting(r, s); });
    return r;
}

}  // namespace roundscope::api
