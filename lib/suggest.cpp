#include "lib/suggest.hpp"

#include <algorithm>

#include "lib/error.hpp"

namespace roundscope {

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0]++;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

std::string closest_name(std::string_view name, const std::vector<std::string>& known) {
    std::string closest;
    std::size_t best = 3;  // at most two edits away
    for (const std::string& k : known)
        if (const std::size_t d = edit_distance(name, k); d < best && d < k.size()) best = d, closest = k;
    return closest;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& known) {
    const std::string closest = closest_name(name, known);
    return closest.empty() ? std::string() : "; did you mean '" + printable(closest) + "'?";
}

}  // namespace roundscope
