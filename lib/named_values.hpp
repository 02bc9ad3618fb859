#pragma once
// A fixed table of the names an enumeration's values have on the command line and in JSON:
// one table per enumeration gives both directions, so a name cannot be spelled twice.
#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/error.hpp"
#include "lib/suggest.hpp"

namespace roundscope {

template <class Enum, std::size_t N>
struct NamedValues {
    std::array<std::pair<Enum, std::string_view>, N> entries;

    std::string_view name(Enum e) const {
        for (const auto& [value, text] : entries)
            if (value == e) return text;
        return "?";
    }
    /// `text`'s value; Error "WHAT: 'text' is not one of a|b|c" otherwise.
    Enum parse(const std::string& what, std::string_view text) const {
        for (const auto& [value, t] : entries)
            if (t == text) return value;
        std::vector<std::string> names;
        for (const auto& [value, t] : entries) names.emplace_back(t);
        throw Error(
            fmt::format("{}: '{}' is not one of {}{}", what, printable(text), list(), did_you_mean(text, names)));
    }
    /// "a|b|c".
    std::string list() const {
        std::string s;
        for (const auto& [value, t] : entries) {
            if (!s.empty()) s += '|';
            s += t;
        }
        return s;
    }
};

}  // namespace roundscope
