#pragma once
// What the recipe tests share: a square problem's shape and a recipe with some settings changed.
#include <algorithm>
#include <bit>
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

/// a and b hold the same bits (4-byte elements: floats compared by their encodings, NaN included).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    static_assert(sizeof(T) == 4);
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](T x, T y) {
               return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
           });
}

/// The settings of `choices` that, each applied alone to r, leave the forward pass's O and LSE
/// as r gives them on `in`: empty where every choice changes bits.
inline std::vector<std::string> choices_changing_nothing(const emu::AttentionRecipe& r, const emu::AttentionShape& sh,
                                                         const emu::AttentionOperands& in,
                                                         const std::vector<std::string>& choices) {
    const emu::ForwardResult base = emu::flash_forward(r, sh, in);
    std::vector<std::string> unchanged;
    for (const std::string& choice : choices) {
        const emu::ForwardResult one = emu::flash_forward(with(r, {choice}), sh, in);
        if (base.o == one.o && same_bits(base.lse, one.lse)) unchanged.push_back(choice);
    }
    return unchanged;
}

}  // namespace roundscope::test
