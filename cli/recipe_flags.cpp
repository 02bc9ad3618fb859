#include "cli/recipe_flags.hpp"

#include "cli/option_checks.hpp"

namespace roundscope::cli {

CLI::Validator recipe_name() {
    return accepted_by([](const std::string& name) { emu::find_recipe(name); }, "RECIPE");
}

void RecipeFlags::add_to(CLI::App* cmd, const std::string& what) {
    auto* recipe = cmd->add_option("--recipe", name_, what)->check(recipe_name());
    if (name_.empty())
        recipe->required();
    else
        recipe->default_str(name_);
    // A setting's key and value are checked on their own here; the recipe they make, by validate.
    cmd->add_option("--set", settings_, "KEY=VALUE: change one setting of the recipe (repeatable)")
        ->check(accepted_by(
            [](const std::string& key_value) {
                emu::AttentionRecipe r;
                emu::apply_setting(r, key_value);
            },
            "KEY=VALUE"));
}

emu::AttentionRecipe RecipeFlags::recipe() const {
    emu::AttentionRecipe r = emu::find_recipe(name_);
    for (const std::string& s : settings_) emu::apply_setting(r, s);
    return r;
}

}  // namespace roundscope::cli
