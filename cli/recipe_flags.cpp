#include "cli/recipe_flags.hpp"

#include "lib/error.hpp"

namespace roundscope::cli {

void RecipeFlags::add_to(CLI::App* cmd, const std::string& what) {
    const CLI::Validator known(
        [](std::string& name) -> std::string {
            try {
                emu::find_recipe(name);
                return {};
            } catch (const Error& e) {
                // CLI11 names the option itself.
                const std::string message = e.what(), prefix = "--recipe: ";
                return message.starts_with(prefix) ? message.substr(prefix.size()) : message;
            }
        },
        "RECIPE");
    auto* recipe = cmd->add_option("--recipe", name_, what)->check(known);
    if (name_.empty())
        recipe->required();
    else
        recipe->default_str(name_);
    cmd->add_option("--set", settings_, "KEY=VALUE: change one setting of the recipe (repeatable)");
}

emu::AttentionRecipe RecipeFlags::recipe() const {
    emu::AttentionRecipe r = emu::find_recipe(name_);
    for (const std::string& s : settings_) emu::apply_setting(r, s);
    return r;
}

}  // namespace roundscope::cli
