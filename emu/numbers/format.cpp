#include "emu/numbers/format.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "lib/dtype.hpp"
#include "lib/error.hpp"

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

namespace {

// Levenshtein's distance, for a suggestion when a name is misspelt.
std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0]++;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

}  // namespace

const Format& format_named(std::string_view name) {
    if (const Format* f = find_format(name)) return *f;
    std::string known, closest;
    std::size_t best = 3;  // suggest a name at most two edits away
    for (const Format& f : all_formats) {
        known += (known.empty() ? "" : ", ") + std::string(f.name);
        if (const std::size_t d = edit_distance(name, f.name); d < best && d < f.name.size())
            best = d, closest = f.name;
    }
    throw Error("unknown format '" + printable(name) + "'" +
                (closest.empty() ? std::string() : "; did you mean '" + closest + "'?") + " (known: " + known + ")");
}

}  // namespace roundscope::emu
