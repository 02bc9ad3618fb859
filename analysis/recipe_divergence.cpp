#include "analysis/recipe_divergence.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "analysis/attention_run.hpp"
#include "analysis/kernel_compare.hpp"
#include "emu/attention/inputs/head_inputs.hpp"
#include "emu/attention/inputs/row_sample.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "emu/batch/format_dtype.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"

namespace roundscope::analysis {
namespace {

/// How a row's outputs compare with the kernel's.
enum class RowState : std::uint8_t { same, lse_differs, only_o_differs, o_differs_without_lse };

/// Rows of one head (`rows`: the head's query rows that `in` holds, in order) run under
/// `recipe`, each with how its o and lse bits compare with the kernel's; `first` receives the
/// first differing element, once.
std::vector<RowState> row_states(const FitDump& d, std::uint64_t head, const emu::AttentionInputs& in,
                                 const std::vector<std::uint64_t>& rows, const emu::AttentionRecipe& recipe,
                                 int threads, Divergence* first = nullptr) {
    AttentionRunOptions o;
    o.causal = d.causal, o.scale = d.scale, o.threads = threads;
    const AttentionRun run = run_attention(in, recipe, o);
    const Tensor* out = d.file->find("o");
    const Tensor* lse = d.file->find("lse");
    const std::uint64_t nq = d.in.n_q, dv = d.in.d_v;
    auto note = [&](std::string name, Shape index, double kernel, double emulated) {
        if (first == nullptr || !first->output.empty()) return;
        first->file = d.file->path;
        first->output = std::move(name);
        first->index = std::move(index);
        first->kernel = kernel, first->recipe = emulated;
    };
    std::vector<RowState> states(rows.size(), RowState::same);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::uint64_t row = rows[i];
        bool o_differs = false, lse_differs = false;
        if (out != nullptr) {
            const emu::Format& f = emu::format_of(out->dtype());
            for (std::uint64_t c = 0; c < dv && !o_differs; ++c) {
                const auto kernel = static_cast<std::uint32_t>(out->bits_at((head * nq + row) * dv + c));
                if (kernel != run.forward.o[i * dv + c]) {
                    o_differs = true;
                    note("o", unravel((head * nq + row) * dv + c, out->shape()), emu::decode(f, kernel),
                         emu::decode(f, run.forward.o[i * dv + c]));
                }
            }
        }
        if (lse != nullptr) {
            const auto kernel = static_cast<std::uint32_t>(lse->bits_at(head * nq + row));
            if (kernel != bits_of(run.forward.lse[i])) {
                lse_differs = true;
                note("lse", unravel(head * nq + row, lse->shape()), static_cast<double>(float_from_bits(kernel)),
                     static_cast<double>(run.forward.lse[i]));
            }
        }
        if (lse_differs)
            states[i] = RowState::lse_differs;
        else if (o_differs)
            states[i] = lse != nullptr ? RowState::only_o_differs : RowState::o_differs_without_lse;
    }
    return states;
}

struct RowRef {
    std::size_t dump;
    std::uint64_t head, row;
};

}  // namespace

std::optional<Divergence> find_divergence(const std::vector<FitDump>& dumps, const FitCandidate& best,
                                          const std::vector<const emu::RecipeKey*>& keys, int threads,
                                          std::uint64_t sample) {
    const emu::AttentionRecipe recipe = best.recipe();
    Divergence r;
    std::vector<RowRef> differing;
    for (std::size_t d = 0; d < dumps.size(); ++d) {
        if (dumps[d].file->find("o") == nullptr && dumps[d].file->find("lse") == nullptr) continue;
        for (std::uint64_t h = 0; h < emu::head_count(dumps[d].in); ++h) {
            std::vector<std::uint64_t> all(dumps[d].in.n_q);
            for (std::uint64_t i = 0; i < all.size(); ++i) all[i] = i;
            const std::vector<RowState> states =
                row_states(dumps[d], h, emu::head_inputs(dumps[d].in, h), all, recipe, threads, &r);
            for (std::uint64_t i = 0; i < all.size(); ++i) {
                if (states[i] == RowState::same) continue;
                differing.push_back({d, h, i});
                ++(states[i] == RowState::lse_differs      ? r.steps.statistics
                   : states[i] == RowState::only_o_differs ? r.steps.after
                                                           : r.steps.unsplit);
            }
            r.rows_total += all.size();
        }
    }
    if (differing.empty()) return std::nullopt;
    r.rows = differing.size();

    // The sample, spread over the differing rows, grouped by head.
    std::map<std::pair<std::size_t, std::uint64_t>, std::vector<std::uint64_t>> by_head;
    const std::uint64_t k = std::min<std::uint64_t>(sample, differing.size());
    for (std::uint64_t i = 0; i < k; ++i) {
        const RowRef& x = differing[i * differing.size() / k];
        by_head[{x.dump, x.head}].push_back(x.row);
    }
    r.sampled = k;
    struct Group {
        std::size_t dump;
        std::uint64_t head;
        std::vector<std::uint64_t> rows;
        emu::AttentionInputs in;
    };
    std::vector<Group> groups;
    for (auto& [where, rows] : by_head) {
        const auto shared = std::make_shared<const std::vector<std::uint64_t>>(rows);
        groups.push_back({where.first, where.second, rows,
                          emu::sampled_rows(emu::head_inputs(dumps[where.first].in, where.second), shared)});
    }

    // Every single change, on the sample: the rows it makes match.
    const std::map<std::string, std::string> current = emu::recipe_settings(recipe);
    for (const emu::RecipeKey* key : keys)
        for (const std::string& value : key->values) {
            if (current.at(key->key) == value) continue;
            emu::AttentionRecipe changed = recipe;
            try {
                emu::apply_setting(changed, key->key + "=" + value);
                emu::validate(changed);
                std::uint64_t fixed = 0;
                for (const Group& g : groups) {
                    const std::vector<RowState> states =
                        row_states(dumps[g.dump], g.head, g.in, g.rows, changed, threads);
                    fixed += static_cast<std::uint64_t>(std::count(states.begin(), states.end(), RowState::same));
                }
                if (fixed > 0) r.explanations.push_back({key->stage, key->key, value, fixed});
            } catch (const Error&) {
                continue;  // settings that do not go together, or that these inputs refuse
            }
        }
    std::stable_sort(r.explanations.begin(), r.explanations.end(),
                     [](const RowExplanation& a, const RowExplanation& b) { return a.rows > b.rows; });
    if (r.explanations.size() > 8) r.explanations.resize(8);
    return r;
}

}  // namespace roundscope::analysis
