#include "api/report/fitted_recipe.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "api/argument_error.hpp"
#include "api/recipe_choice.hpp"
#include "lib/error.hpp"

namespace roundscope::api {

emu::AttentionRecipe fitted_recipe(const std::string& path) {
    const auto refuse = [&](const std::string& why) { return ArgumentError("fitted", printable(path) + ": " + why); };
    std::error_code ec;
    // a regular file only: a FIFO or a device would block the read or never end
    if (std::filesystem::status(path, ec).type() != std::filesystem::file_type::regular)
        throw refuse("not a regular file (roundscope fit FILE --json > FIT.json writes one)");
    if (std::filesystem::file_size(path, ec) > (std::uintmax_t{16} << 20) || ec)
        throw refuse("over 16 MiB: not fit's JSON");
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    if (!in.good() && !in.eof()) throw refuse("cannot be read");
    const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("best") || !j["best"].is_object())
        throw refuse("not the JSON of roundscope fit --json (no \"best\" candidate)");
    const nlohmann::json& best = j["best"];
    if (!best.contains("preset") || !best["preset"].is_string() || !best.contains("settings") ||
        !best["settings"].is_object())
        throw refuse("its best candidate has no \"preset\" and \"settings\"");
    RecipeChoice choice{best["preset"].get<std::string>(), {}};
    for (const auto& [key, value] : best["settings"].items()) {
        if (!value.is_string()) throw refuse("setting '" + key + "' is not a string");
        choice.settings.push_back(key + "=" + value.get<std::string>());
    }
    emu::AttentionRecipe recipe;
    try {
        recipe = recipe_of(choice);
        emu::validate(recipe);
    } catch (const Error& e) {  // an unknown preset, key or value, or settings that cannot run together
        throw refuse(e.what());
    }
    recipe.name = fitted_recipe_name;
    return recipe;
}

}  // namespace roundscope::api
