// `roundscope recipes [--json|--markdown]`: the flash-attention presets with every setting, and
// the keys `--set` accepts (emu/attention/recipe/attention_recipe.hpp) with what each kernel runs.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "api/catalog.hpp"
#include "api/recipe_reference.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "emu/attention/recipe/recipe_sources.hpp"

namespace roundscope::cli {

void add_recipes_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("recipes", "The flash-attention recipes (presets) and the keys of --set");
    auto json = std::make_shared<bool>(false);
    auto markdown = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "Print one JSON object");
    cmd->add_flag("--markdown", *markdown,
                  "Print the key reference: every key by stage, and the values each kernel runs (docs/recipe-keys.md)")
        ->excludes("--json");
    cmd->footer(
        "Example: roundscope recipes && roundscope attention dump.safetensors --recipe fa2-bf16 --set kv_order=reverse "
        "-o o.safetensors\n");
    cmd->callback([json, markdown] {
        if (*markdown) {
            fmt::print("{}", api::recipe_reference_markdown());
            return;
        }
        if (*json) {
            print_json(api::recipes_json());
            return;
        }
        const auto keys = emu::recipe_keys();
        std::vector<std::string> headers{"setting"};
        for (const emu::AttentionRecipe& r : emu::recipe_presets()) headers.push_back(r.name);
        std::vector<std::vector<std::string>> rows;
        for (const auto& [key, accepts] : keys) {
            std::vector<std::string> row{key};
            for (const emu::AttentionRecipe& r : emu::recipe_presets()) row.push_back(emu::recipe_settings(r).at(key));
            rows.push_back(row);
        }
        print_table(headers, rows);
        fmt::print("\nSources:\n");
        for (const emu::AttentionRecipe& r : emu::recipe_presets())
            fmt::print("  {:24} {}\n", r.name, emu::recipe_source(r.name));
        fmt::print("\n--set KEY=VALUE:\n");
        for (const auto& [key, accepts] : keys) fmt::print("  {:16} {}\n", key, accepts);
    });
}

}  // namespace roundscope::cli
