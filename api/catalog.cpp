#include "api/catalog.hpp"

#include "api/recipe_reference.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "emu/attention/recipe/recipe_sources.hpp"
#include "emu/numbers/format_info.hpp"

namespace roundscope::api {

nlohmann::json formats_json() {
    nlohmann::json list = nlohmann::json::array();
    for (const emu::Format& f : emu::all_formats) {
        const emu::FormatInfo i = emu::format_info(f);
        list.push_back({{"name", f.name},
                        {"bits", f.bits},
                        {"exp_bits", f.exp_bits},
                        {"man_bits", f.man_bits},
                        {"bias", f.bias},
                        {"max", i.max},
                        {"min_normal", i.min_normal},
                        {"min_subnormal", i.min_subnormal},
                        {"has_inf", emu::has_inf(f)},
                        {"nan", i.nan},
                        {"signed", f.is_signed},
                        {"inf", i.inf}});
    }
    return {{"formats", list}};
}

nlohmann::json recipes_json() {
    nlohmann::json recipes = nlohmann::json::array();
    for (const emu::AttentionRecipe& r : emu::recipe_presets())
        recipes.push_back(
            {{"name", r.name}, {"settings", emu::recipe_settings(r)}, {"source", emu::recipe_source(r.name)}});
    return {{"recipes", recipes},
            {"keys", emu::recipe_keys()},
            {"key_table", recipe_key_table_json()},
            {"kernels", kernel_capabilities_json()}};
}

}  // namespace roundscope::api
