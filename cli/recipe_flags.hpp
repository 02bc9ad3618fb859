#pragma once
// --recipe NAME and --set KEY=VALUE..., the same in every command that runs a recipe.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "api/recipe_choice.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"

namespace roundscope::cli {

/// Checks an option's value names a preset (--recipe).
CLI::Validator recipe_name();

class RecipeFlags {
public:
    /// `default_name` empty: --recipe is required.
    explicit RecipeFlags(std::string default_name = {}) : name_(std::move(default_name)) {}

    /// Adds both options to `cmd`; an unknown recipe name or setting is refused while the command
    /// line is parsed. `what` says which recipes fit ("The FP8 recipe").
    void add_to(CLI::App* cmd, const std::string& what = "A preset (roundscope recipes)");

    /// The named preset with every --set applied in order.
    emu::AttentionRecipe recipe() const;
    /// The preset and settings as a request names them.
    api::RecipeChoice choice() const { return {name_, settings_}; }

private:
    std::string name_;
    std::vector<std::string> settings_;
};

}  // namespace roundscope::cli
