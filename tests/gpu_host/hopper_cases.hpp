#pragma once
// What the Hopper kernels' host tests share: a case (scenario, heads, N, D, the causal mask, fewer
// queries than keys), its problem as a kernel takes it, the recipe under test with settings, and
// the count of elements two results differ in.
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/synthetic_attention.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"

namespace roundscope::test::hopper {

/// Elements of `got` other than `want`'s (every one where the sizes differ).
inline std::size_t differing(const std::vector<std::uint32_t>& want, const std::vector<std::uint32_t>& got) {
    if (want.size() != got.size()) return ~std::size_t{0};
    std::size_t n = 0;
    for (std::size_t i = 0; i < want.size(); ++i) n += want[i] != got[i];
    return n;
}

/// The preset `name` with `settings` ("key=value") applied.
inline emu::AttentionRecipe recipe(const char* name, const std::vector<std::string>& settings = {}) {
    emu::AttentionRecipe r = emu::find_recipe(name);
    for (const std::string& s : settings) emu::apply_setting(r, s);
    return r;
}

struct Case {
    analysis::Scenario scenario;
    std::uint64_t heads, n, d;
    bool causal;
    std::uint64_t n_q = 0;  // fewer queries than keys: the last n_q of the n (bottom-right); 0: n
};

struct Problem {
    emu::AttentionShape shape;
    emu::AttentionOperands in;
};

/// The case's synthetic inputs (drawn from `seed`) held in `input` (with dO when `backward`),
/// reduced to the last n_q queries (and their dO) where the case has fewer queries than keys.
inline Problem problem(const Case& c, const emu::Format& input, bool backward, std::uint64_t seed) {
    analysis::SyntheticSpec spec;
    spec.scenario = c.scenario, spec.heads = c.heads, spec.n = c.n, spec.d = c.d, spec.seed = seed;
    const emu::AttentionInputs inputs = analysis::synthetic_attention(spec);
    Problem p{emu::attention_shape_of(inputs, c.causal, 0), emu::attention_operands(inputs, input, backward)};
    if (c.n_q != 0) {
        std::vector<std::uint32_t> q, d_o;
        for (std::uint64_t h = 0; h < p.shape.heads; ++h) {
            const auto from = static_cast<std::ptrdiff_t>((h * c.n + c.n - c.n_q) * c.d);
            const auto to = static_cast<std::ptrdiff_t>((h + 1) * c.n * c.d);
            q.insert(q.end(), p.in.q.begin() + from, p.in.q.begin() + to);
            if (backward) d_o.insert(d_o.end(), p.in.d_o.begin() + from, p.in.d_o.begin() + to);
        }
        p.in.q = q, p.in.d_o = d_o, p.shape.n_q = c.n_q;
    }
    return p;
}

inline constexpr analysis::Scenario scenarios[] = {analysis::Scenario::random, analysis::Scenario::sink,
                                                   analysis::Scenario::repeated_max, analysis::Scenario::wide};

}  // namespace roundscope::test::hopper
