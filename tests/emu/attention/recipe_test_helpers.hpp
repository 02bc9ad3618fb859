#pragma once
// What the recipe tests share: a square problem's shape and a recipe with some settings changed.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"

namespace roundscope::test {

/// `heads` heads of n queries and n keys at head dimension d, scale 1/sqrt(d).
inline emu::AttentionShape square_shape(std::uint64_t heads, std::uint64_t n, std::uint64_t d, bool causal = false) {
    return {heads, n, n, d, d, causal, static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)))};
}

/// r with each KEY=VALUE of `settings` applied in order.
inline emu::AttentionRecipe with(emu::AttentionRecipe r, const std::vector<std::string>& settings) {
    for (const std::string& s : settings) emu::apply_setting(r, s);
    return r;
}

}  // namespace roundscope::test
