#include "emu/block/block_format.hpp"

#include <string>
#include <vector>

#include "lib/error.hpp"
#include "lib/suggest.hpp"

namespace roundscope::emu {
namespace {

// By name (docs/cli.md); nullptr if unknown.
const BlockFormat* find_block_format(std::string_view name) {
    for (const BlockFormat& f : all_block_formats)
        if (f.name == name) return &f;
    return nullptr;
}

}  // namespace

const BlockFormat& block_format_named(std::string_view name) {
    if (const BlockFormat* f = find_block_format(name)) return *f;
    std::string names;
    std::vector<std::string> known;
    for (const BlockFormat& f : all_block_formats) {
        if (!names.empty()) names += ' ';
        names += f.name;
        known.emplace_back(f.name);
    }
    throw Error("unknown block format '" + printable(name) + "'" + did_you_mean(name, known) +
                " (block formats: " + names + ")");
}

std::string_view scale_rule_name(ScaleRule r) {
    switch (r) {
        case ScaleRule::floor:
            return "floor";
        case ScaleRule::ceil:
            return "ceil";
        case ScaleRule::even:
            return "even";
        case ScaleRule::rceil:
            return "rceil";
    }
    return "?";
}

ScaleRule parse_scale_rule(std::string_view name, std::string_view option) {
    for (ScaleRule r : all_scale_rules)
        if (scale_rule_name(r) == name) return r;
    std::vector<std::string> known;
    for (ScaleRule r : all_scale_rules) known.emplace_back(scale_rule_name(r));
    throw Error((option.empty() ? "" : std::string(option) + ": ") + "unknown scale rule '" + printable(name) + "'" +
                did_you_mean(name, known) + " (rules: floor ceil even rceil)");
}

}  // namespace roundscope::emu
