#include "lib/suggest.hpp"

#include <algorithm>

#include "lib/error.hpp"

namespace roundscope {

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
    // d[i][j]: the distance between a's first i and b's first j characters, three rows kept.
    const std::size_t n = b.size();
    std::vector<std::size_t> before(n + 1), previous(n + 1), row(n + 1);
    for (std::size_t j = 0; j <= n; ++j) previous[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        row[0] = i;
        for (std::size_t j = 1; j <= n; ++j) {
            const bool same = lower(a[i - 1]) == lower(b[j - 1]);
            row[j] = std::min({previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (same ? 0 : 1)});
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
                row[j] = std::min(row[j], before[j - 2] + 1);  // two neighbours swapped: one edit
        }
        std::swap(before, previous);
        std::swap(previous, row);
    }
    return previous[n];
}

std::string closest_name(std::string_view name, const std::vector<std::string>& known) {
    std::string closest;
    std::size_t best = 3;  // at most two edits away, and fewer than half the name's length
    for (const std::string& k : known)
        if (const std::size_t d = edit_distance(name, k); d < best && 2 * d < k.size()) best = d, closest = k;
    return closest;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& known) {
    const std::string closest = closest_name(name, known);
    return closest.empty() ? std::string() : "; did you mean '" + printable(closest) + "'?";
}

}  // namespace roundscope
