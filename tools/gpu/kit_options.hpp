#pragma once
// The command-line pieces the kit's programs share (gpu_sweep, bench_flash_gpu, kit_inputs, and
// tests/gpu/test_gpu_flash): comma lists, bounded sizes and recipe settings, refused with the
// option's name.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "emu/attention/recipe/attention_recipe.hpp"

namespace roundscope::kit {

/// "a,b,c" as {"a", "b", "c"} ("" is one empty item).
inline std::vector<std::string> split(std::string_view list) {
    std::vector<std::string> out;
    for (std::size_t at = 0; at <= list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        out.emplace_back(list.substr(at, comma - at));
        at = comma + 1;
    }
    return out;
}

/// `text` as a whole number in [least, most], or nothing (signs, spaces, other characters, out of
/// range: nothing).
inline std::optional<std::uint64_t> number(std::string_view text, std::uint64_t least, std::uint64_t most) {
    if (text.empty() || text.size() > 20) return std::nullopt;
    std::uint64_t v = 0;
    for (const char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        const auto digit = static_cast<std::uint64_t>(c - '0');
        if (v > (UINT64_MAX - digit) / 10) return std::nullopt;
        v = v * 10 + digit;
    }
    if (v < least || v > most) return std::nullopt;
    return v;
}

/// `--set KEY=VALUE` settings, applied in order to `recipe` (each checked against the key table as
/// it is given: apply_settings throws Error naming a bad key or value).
inline void apply_settings(emu::AttentionRecipe& recipe, const std::vector<std::string>& settings) {
    for (const std::string& s : settings) emu::apply_setting(recipe, s);
}

/// One `--set` value, checked now (a key or value the table refuses is an Error before any work).
inline std::string checked_setting(const std::string& setting) {
    emu::AttentionRecipe r;
    emu::apply_setting(r, setting);
    return setting;
}

}  // namespace roundscope::kit
