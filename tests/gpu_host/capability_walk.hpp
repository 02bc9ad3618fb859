#pragma once
// The capability walk: every value of every recipe key (emu::recipe_key_table), set one at a
// time on a base recipe, run by a kernel and by the emulator. A setting the kernel's row of the
// capability table runs must give the emulator's bits on every output; one it refuses must be
// refused by the kernel with the table's reason. The walk also records the settings it ran whose
// emulator bits equal the base recipe's on the problem: a kernel that ignored those would pass
// unseen, so the test names them (what the problem cannot show).
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "emu/attention/recipe/kernel_capabilities.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"

namespace roundscope::test {

/// A kernel as the walk runs it: its forward pass, and (for a kernel with one) its backward pass.
struct WalkedKernel {
    const emu::KernelCapabilities* table;
    std::function<emu::ForwardResult(const emu::AttentionRecipe&, const emu::AttentionShape&,
                                     const emu::AttentionOperands&)>
        forward;
    std::function<emu::BackwardResult(const emu::AttentionRecipe&, const emu::AttentionShape&,
                                      const emu::AttentionOperands&, const emu::ForwardResult&)>
        backward;  // empty: forward only
};

struct WalkResult {
    int ran = 0, refused = 0, invalid = 0;  // invalid: the emulator refuses the recipe too
    std::vector<std::string> failures;      // "KEY=VALUE: what went wrong"
    std::set<std::string> ran_settings;     // "KEY=VALUE" the kernel ran
    std::set<std::string> unshown;          // "KEY=VALUE" run with the base recipe's bits
};

/// The settings some walk ran and no walk showed (each walk that ran it gave its base's bits),
/// less those `by_design` names ("KEY" or "KEY=VALUE") as having no effect on bits.
inline std::vector<std::string> unshown_in_all(const std::vector<const WalkResult*>& walks,
                                               const std::map<std::string, std::string>& by_design) {
    std::set<std::string> ran, shown;
    for (const WalkResult* w : walks) {
        for (const std::string& s : w->ran_settings) {
            ran.insert(s);
            if (!w->unshown.contains(s)) shown.insert(s);
        }
    }
    std::vector<std::string> out;
    for (const std::string& s : ran)
        if (!shown.contains(s) && !by_design.contains(s) && !by_design.contains(s.substr(0, s.find('='))))
            out.push_back(s);
    return out;
}

// Every output of a run as bits, named; o_f32 only where the kernel fills it.
inline std::vector<std::pair<std::string, std::vector<std::uint32_t>>> outputs(const emu::ForwardResult& f,
                                                                               const emu::BackwardResult* b) {
    std::vector<std::pair<std::string, std::vector<std::uint32_t>>> out{{"o", f.o}, {"lse", float_bits(f.lse)}};
    if (!f.o_f32.empty()) out.emplace_back("o_f32", float_bits(f.o_f32));
    if (b != nullptr) {
        out.emplace_back("dq", b->dq), out.emplace_back("dk", b->dk), out.emplace_back("dv", b->dv);
        out.emplace_back("delta", float_bits(b->delta));
    }
    return out;
}

struct Run {
    emu::ForwardResult forward;
    emu::BackwardResult backward;
    bool has_backward = false;
    std::vector<std::pair<std::string, std::vector<std::uint32_t>>> bits() const {
        return outputs(forward, has_backward ? &backward : nullptr);
    }
};

inline Run emulator_run(const emu::AttentionRecipe& r, const emu::AttentionShape& shape,
                        const emu::AttentionInputs& inputs, bool backward) {
    const emu::AttentionOperands in = emu::attention_operands(inputs, *r.target.input, true);
    Run run{emu::flash_forward(r, shape, in, 1), {}, backward};
    if (backward) run.backward = emu::flash_backward(r, shape, in, run.forward, 1);
    return run;
}

// "dq: 12 of 4608 differ, the first at 7", or empty when the bits are equal.
inline std::string first_difference(const Run& want, const Run& got) {
    const auto w = want.bits(), g = got.bits();
    for (std::size_t i = 0; i < w.size(); ++i) {
        const auto& [name, a] = w[i];
        const auto& b = g[i].second;
        if (a.size() != b.size())
            return name + ": " + std::to_string(b.size()) + " values, not " + std::to_string(a.size());
        std::size_t n = 0, first = 0;
        for (std::size_t j = 0; j < a.size(); ++j)
            if (a[j] != b[j] && n++ == 0) first = j;
        if (n != 0)
            return name + ": " + std::to_string(n) + " of " + std::to_string(a.size()) + " differ, the first at " +
                   std::to_string(first);
    }
    return {};
}

inline WalkResult walk(const WalkedKernel& kernel, const emu::AttentionRecipe& base, const emu::AttentionShape& shape,
                       const emu::AttentionInputs& inputs) {
    WalkResult result;
    const bool backward = static_cast<bool>(kernel.backward);
    const Run base_run = emulator_run(base, shape, inputs, backward);
    const auto base_settings = emu::recipe_settings(base);
    for (const emu::RecipeKey& key : emu::recipe_key_table()) {
        if (!backward && key.stage == "backward") continue;  // a forward kernel never reads them
        bool key_shown = false;                              // some value of the key gave other bits than the base's
        for (const std::string& value : key.values) {
            const std::string setting = key.key + "=" + value;
            emu::AttentionRecipe r = base;
            emu::apply_setting(r, setting);
            Run want;
            try {
                emu::validate(r);
                want = emulator_run(r, shape, inputs, backward);
            } catch (const Error&) {
                ++result.invalid;
                continue;
            }
            const std::string why = emu::capability_refusal(*kernel.table, r, backward);
            const emu::AttentionOperands in = emu::attention_operands(inputs, *r.target.input, true);
            if (!why.empty()) {
                ++result.refused;
                try {
                    (void)kernel.forward(r, shape, in);
                    if (backward) (void)kernel.backward(r, shape, in, want.forward);
                    result.failures.push_back(setting + ": ran, but the table says: " + why);
                } catch (const Error& e) {
                    if (std::string(e.what()).find(why) == std::string::npos)
                        result.failures.push_back(setting + ": refused with '" + e.what() + "', not '" + why + "'");
                }
                continue;
            }
            ++result.ran;
            if (base_settings.at(key.key) != value) result.ran_settings.insert(setting);
            Run got;
            try {
                got.forward = kernel.forward(r, shape, in), got.has_backward = backward;
                if (backward) got.backward = kernel.backward(r, shape, in, got.forward);
            } catch (const Error& e) {
                result.failures.push_back(setting + ": the table runs it, the kernel refused: " + e.what());
                continue;
            }
            if (base_settings.at(key.key) != value) {
                if (first_difference(base_run, want).empty())
                    result.unshown.insert(setting);
                else
                    key_shown = true;
            }
            if (got.forward.o_f32.empty()) want.forward.o_f32.clear();  // a kernel that does not write it
            if (const std::string d = first_difference(want, got); !d.empty())
                result.failures.push_back(setting + ": " + d);
        }
        // The base's own value is shown where another value gave other bits (the kernel told them apart).
        if (key_shown) result.ran_settings.insert(key.key + "=" + base_settings.at(key.key));
    }
    return result;
}

}  // namespace roundscope::test
