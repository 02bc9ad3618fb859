#include "emu/numbers/format.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "lib/dtype.hpp"
#include "lib/error.hpp"
#include "lib/suggest.hpp"

namespace roundscope::emu {

const Format* find_format(std::string_view name) {
    for (const Format& f : all_formats)
        if (f.name == name) return &f;
    // Other spellings (ml_dtypes / PyTorch names, the aliases of docs/cli.md) are listed
    // once, with the dtypes; a floating dtype is named after its format.
    if (const auto t = find_dtype_alias(name); t && is_floating(*t))
        for (const Format& f : all_formats)
            if (f.name == roundscope::name(*t)) return &f;
    // Any case: every name and alias is lower-case ("E4M3", "BF16", "Float8_E4M3FN").
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
    if (lower != name) return find_format(lower);
    return nullptr;
}

const Format& format_named(std::string_view name) {
    if (const Format* f = find_format(name)) return *f;
    std::string known;
    std::vector<std::string> names;
    for (const Format& f : all_formats) {
        known += (known.empty() ? "" : ", ") + std::string(f.name);
        names.emplace_back(f.name);
    }
    throw Error("unknown format '" + printable(name) + "'" + did_you_mean(name, names) + " (known: " + known + ")");
}

}  // namespace roundscope::emu
