#include "analysis/recipe_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "analysis/kernel_compare.hpp"
#include "analysis/recipe_divergence.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/inputs/head_inputs.hpp"
#include "emu/attention/inputs/row_sample.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "emu/batch/format_dtype.hpp"
#include "lib/error.hpp"

namespace roundscope::analysis {

emu::AttentionRecipe FitCandidate::recipe() const {
    emu::AttentionRecipe r = emu::find_recipe(preset);
    for (const auto& [key, value] : settings) emu::apply_setting(r, key + "=" + value);
    return r;
}

namespace {

using Clock = std::chrono::steady_clock;

// Keys a search never changes: the output formats are the dump's dtypes (set on every preset),
// a key of one value changes nothing, and the stochastic rounding's seed is not a choice of
// arithmetic.
bool searchable(const emu::RecipeKey& k, bool gradients) {
    if (k.key == "o_format" || k.key == "grad_format" || k.key == "grad_seed" || k.values.size() < 2) return false;
    return gradients || k.stage != "backward";
}

/// Better first: more bits matched, then fewer settings changed (the simpler explanation).
bool better(const FitCandidate& a, const FitCandidate& b) {
    return a.matched != b.matched ? a.matched > b.matched : a.settings.size() < b.settings.size();
}

class Search {
public:
    Search(const std::vector<FitDump>& dumps, const FitOptions& o) : dumps_(dumps), o_(o) { start_ = Clock::now(); }

    std::vector<std::string> outputs;                      // scored on the search's rows
    std::vector<std::vector<emu::AttentionInputs>> heads;  // each dump's sample of each head; empty: every row
    std::map<std::string, std::string> formats;            // o_format and grad_format: the dump's dtypes
    std::size_t evaluations = 0, refused = 0;
    std::string first_refusal, last_refusal;

    double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
    bool out_of_budget() const {
        return evaluations >= o_.max_evaluations || (o_.max_seconds > 0 && seconds() >= o_.max_seconds);
    }

    /// `c` scored, or nullopt where it was scored before, cannot run, or the budget is spent.
    std::optional<FitCandidate> score(FitCandidate c) {
        if (out_of_budget()) return std::nullopt;
        emu::AttentionRecipe recipe;
        try {
            recipe = c.recipe();
            emu::validate(recipe);
        } catch (const Error&) {
            return std::nullopt;  // settings that do not go together: not a candidate
        }
        if (!seen_.insert(identity(recipe)).second) return std::nullopt;
        ++evaluations;
        try {
            const KernelComparison r = compare(recipe, outputs, !heads.empty());
            c.outputs.clear();
            for (const OutputComparison& x : r.outputs) c.outputs.push_back({x.name, x.matched, x.total});
            c.matched = r.matched, c.total = r.total;
            return c;
        } catch (const Error& e) {
            if (refused++ == 0) first_refusal = e.what();  // the emulator cannot run it here (a mask, a head size)
            return std::nullopt;
        }
    }

    /// The candidate on every row and every output named; nullopt where it cannot run there (a
    /// forward-only recipe, which a sample of rows never asks for gradients).
    std::optional<FitCandidate> confirm(FitCandidate c, const std::vector<std::string>& all) {
        ++evaluations;
        try {
            const KernelComparison r = compare(c.recipe(), all, false);
            c.outputs.clear();
            for (const OutputComparison& x : r.outputs) c.outputs.push_back({x.name, x.matched, x.total});
            c.matched = r.matched, c.total = r.total;
            return c;
        } catch (const Error& e) {
            if (refused++ == 0) first_refusal = e.what();
            last_refusal = e.what();
            return std::nullopt;
        }
    }

    /// `base` with KEY=VALUE, its settings kept in the key table's order and without those equal
    /// to the preset's; nullopt where it is `base` itself.
    std::optional<FitCandidate> changed(const FitCandidate& base, const std::string& key, const std::string& value) {
        std::map<std::string, std::string> wanted(base.settings.begin(), base.settings.end());
        if (auto it = wanted.find(key); it != wanted.end() && it->second == value) return std::nullopt;
        wanted[key] = value;
        const std::map<std::string, std::string>& preset = preset_settings(base.preset);
        FitCandidate c;
        c.preset = base.preset;
        for (const emu::RecipeKey& k : table_)
            if (auto it = wanted.find(k.key); it != wanted.end() && preset.at(k.key) != it->second)
                c.settings.emplace_back(k.key, it->second);
        if (c.settings == base.settings) return std::nullopt;
        return c;
    }

    const std::vector<emu::RecipeKey>& table() const { return table_; }

    /// From here on every row and every output: the sample matched where the dump does not.
    void use_every_row(const std::vector<std::string>& all) {
        heads.clear();
        outputs = all;
        seen_.clear();
    }

private:
    /// The bits of every dump (of every head's sample where sampled), added output by output.
    KernelComparison compare(const emu::AttentionRecipe& recipe, const std::vector<std::string>& names,
                             bool sampled) const {
        const CompareChoice choice{.outputs = names, .worst_count = 0, .truth = false};
        KernelComparison total;
        auto add = [&](const KernelComparison& part) {
            for (const OutputComparison& x : part.outputs) {
                auto it = std::find_if(total.outputs.begin(), total.outputs.end(),
                                       [&](const OutputComparison& y) { return y.name == x.name; });
                if (it == total.outputs.end())
                    it = total.outputs.insert(total.outputs.end(), OutputComparison{.name = x.name});
                it->matched += x.matched, it->total += x.total;
            }
            total.matched += part.matched, total.total += part.total;
        };
        for (std::size_t d = 0; d < dumps_.size(); ++d) {
            const FitDump& dump = dumps_[d];
            AttentionRunOptions run;
            run.causal = dump.causal, run.scale = dump.scale, run.threads = o_.threads;
            if (!sampled) {
                add(compare_kernel(*dump.file, dump.in, recipe, run, choice));
                continue;
            }
            for (std::uint64_t h = 0; h < heads[d].size(); ++h)
                add(compare_kernel_rows(*dump.file, dump.in, h, heads[d][h], recipe, run, choice));
        }
        return total;
    }

    /// A preset's settings, found once: every candidate of the search is compared with them.
    const std::map<std::string, std::string>& preset_settings(const std::string& name) {
        auto it = presets_.find(name);
        if (it == presets_.end()) it = presets_.emplace(name, emu::recipe_settings(emu::find_recipe(name))).first;
        return it->second;
    }

    static std::string identity(const emu::AttentionRecipe& r) {
        std::string s;
        for (const auto& [key, value] : emu::recipe_settings(r)) s += key + "=" + value + ";";
        return s;
    }

    const std::vector<FitDump>& dumps_;
    const FitOptions& o_;
    const std::vector<emu::RecipeKey> table_ = emu::recipe_key_table();
    std::set<std::string> seen_;
    std::map<std::string, std::map<std::string, std::string>> presets_;
    Clock::time_point start_;
};

std::vector<std::string> outputs_held(const TensorFile& file, const std::vector<std::string>& named) {
    if (!named.empty()) return named;
    std::vector<std::string> held;
    for (const std::string& n : kernel_output_names())
        if (file.find(n) != nullptr) held.push_back(n);
    return held;
}

/// The dump's output formats, which every candidate writes (o_format, grad_format).
std::map<std::string, std::string> output_formats(const TensorFile& file, const std::vector<std::string>& outputs) {
    std::map<std::string, std::string> f;
    for (const std::string& n : outputs) {
        const Tensor& t = *file.find(n);
        if (n == "lse") continue;
        if (!is_floating(t.dtype()))
            throw Error("tensor '" + n + "' of " + file.path + " is " + std::string(name(t.dtype())) +
                        ": a kernel's output is a floating-point tensor");
        f[n == "o" ? "o_format" : "grad_format"] = std::string(emu::format_of(t.dtype()).name);
    }
    return f;
}

/// The keys searched: those named (each checked), or every searchable one.
std::vector<const emu::RecipeKey*> keys_searched(const std::vector<emu::RecipeKey>& table,
                                                 const std::vector<std::string>& named, bool gradients) {
    std::vector<const emu::RecipeKey*> keys;
    for (const std::string& n : named) {
        auto it = std::find_if(table.begin(), table.end(), [&](const emu::RecipeKey& k) { return k.key == n; });
        if (it == table.end()) throw Error("'" + n + "' is not a recipe key (roundscope recipes lists them)");
        if (n == "o_format" || n == "grad_format")
            throw Error("'" + n + "' is the dump's own dtype: every candidate writes it");
        keys.push_back(&*it);
    }
    if (named.empty())
        for (const emu::RecipeKey& k : table)
            if (searchable(k, gradients)) keys.push_back(&k);
    return keys;
}

/// Does `more` hold every setting of `fewer` (and others)?
bool adds_to(const FitCandidate& more, const FitCandidate& fewer) {
    if (more.preset != fewer.preset || more.settings.size() <= fewer.settings.size()) return false;
    return std::all_of(fewer.settings.begin(), fewer.settings.end(), [&](const auto& s) {
        return std::find(more.settings.begin(), more.settings.end(), s) != more.settings.end();
    });
}

/// `c` into `ranked` (best first, at most `keep`), unless it only adds settings that change no
/// bit to a candidate there; candidates that do so to `c` leave.
void insert_ranked(std::vector<FitCandidate>& ranked, const FitCandidate& c, std::size_t keep) {
    if (std::any_of(ranked.begin(), ranked.end(),
                    [&](const FitCandidate& k) { return k.matched >= c.matched && adds_to(c, k); }))
        return;
    std::erase_if(ranked, [&](const FitCandidate& k) { return c.matched >= k.matched && adds_to(k, c); });
    ranked.insert(std::upper_bound(ranked.begin(), ranked.end(), c, better), c);
    if (ranked.size() > keep) ranked.resize(keep);
}

bool same_recipe(const FitCandidate& a, const FitCandidate& b) {
    return a.preset == b.preset && a.settings == b.settings;
}

// Whether a and b match the same number of O's bits (the output every dump holds): two presets
// that compute the same O here (torch-math-sm90 and torch-cpu-math: both P in float32, their
// GEMMs' orders hidden by O's cast; the LSE, which the math path does not write, is each recipe's
// own) are one line of search, not two.
bool same_o(const FitCandidate& a, const FitCandidate& b) {
    const auto o = [](const FitCandidate& c) {
        const auto it =
            std::find_if(c.outputs.begin(), c.outputs.end(), [](const OutputScore& x) { return x.name == "o"; });
        return it == c.outputs.end() ? std::optional<std::uint64_t>{} : std::optional<std::uint64_t>{it->matched};
    };
    return o(a).has_value() && o(a) == o(b);
}

/// The next round's beam from `pool` (best first): the best of each preset, presets in rank
/// order, for half the beam (rounded up), then the best of the rest. A preset that leads can be a
/// dead end: torch-math-sm90's float32 P is nearer a kernel that rounds P to f16 than any bf16
/// preset is, but no key of it rounds P; a beam of its variants alone never leaves it. A preset
/// whose best matches as many of O's bits as one already taken takes no slot of the first half:
/// the GPU's and the CPU's math paths are one dead end, not two.
std::vector<FitCandidate> diverse_beam(const std::vector<FitCandidate>& pool, std::size_t width) {
    std::vector<FitCandidate> beam;
    std::set<std::string> presets;
    for (const FitCandidate& c : pool)
        if (beam.size() < (width + 1) / 2 && presets.insert(c.preset).second &&
            std::none_of(beam.begin(), beam.end(), [&](const FitCandidate& b) { return same_o(b, c); }))
            beam.push_back(c);
    for (const FitCandidate& c : pool) {
        if (beam.size() >= width) break;
        if (std::none_of(beam.begin(), beam.end(), [&](const FitCandidate& b) { return same_recipe(b, c); }))
            beam.push_back(c);
    }
    std::stable_sort(beam.begin(), beam.end(), better);
    return beam;
}

/// Do `a` and `b` hold the same recipes (in any order)?
bool same_members(const std::vector<FitCandidate>& a, const std::vector<FitCandidate>& b) {
    return a.size() == b.size() && std::all_of(a.begin(), a.end(), [&](const FitCandidate& x) {
               return std::any_of(b.begin(), b.end(), [&](const FitCandidate& y) { return same_recipe(x, y); });
           });
}

}  // namespace

void check_fit_keys(const std::vector<std::string>& keys) { keys_searched(emu::recipe_key_table(), keys, true); }

FitResult fit_recipe(const std::vector<FitDump>& dumps, const FitOptions& options) {
    if (dumps.empty()) throw Error("fit needs at least one dump");
    const std::vector<std::string> all = outputs_held(*dumps.front().file, options.outputs);
    if (all.empty())
        throw Error(dumps.front().file->path + " holds nothing a kernel wrote to fit (o, lse, dq, dk or dv)");
    std::map<std::string, std::string> formats;
    const bool gradients = std::any_of(all.begin(), all.end(), [](const std::string& n) { return n[0] == 'd'; });
    for (const FitDump& d : dumps) {
        for (const std::string& n : all)
            if (d.file->find(n) == nullptr) throw Error(d.file->path + " holds no '" + n + "' to fit");
        check_kernel_output_shapes(*d.file, d.in);
        try {
            emu::attention_operands(d.in, emu::f32, gradients);  // NaN or Inf in q, k, v or dO, before any work
        } catch (const Error& e) {
            throw Error(d.file->path + ": " + e.what());
        }
        const std::map<std::string, std::string> f = output_formats(*d.file, all);
        if (&d != &dumps.front() && f != formats)
            throw Error(d.file->path + ": its outputs' dtypes differ from " + dumps.front().file->path +
                        "'s (one kernel writes one format)");
        formats = f;
    }
    if (options.beam == 0) throw Error("the beam must hold at least one candidate");

    Search search(dumps, options);
    search.formats = formats;
    const std::vector<const emu::RecipeKey*> keys = keys_searched(search.table(), options.keys, gradients);
    std::vector<std::string> starts = options.presets;
    for (const std::string& p : starts) emu::find_recipe(p);  // an unknown preset stops here
    if (starts.empty())
        for (const emu::AttentionRecipe& p : emu::recipe_presets()) starts.push_back(p.name);

    // The sample: the same rows of every head for every candidate; forward outputs only.
    FitResult result;
    const bool sample = options.rows > 0 && std::any_of(dumps.begin(), dumps.end(),
                                                        [&](const FitDump& d) { return options.rows < d.in.n_q; });
    if (sample) {
        for (const FitDump& d : dumps) {
            search.heads.emplace_back();
            for (std::uint64_t h = 0; h < emu::head_count(d.in); ++h) {
                auto rows = std::make_shared<const std::vector<std::uint64_t>>(
                    emu::sample_rows(d.in.n_q, options.rows, options.seed + h));
                search.heads.back().push_back(emu::sampled_rows(emu::head_inputs(d.in, h), rows));
            }
        }
        for (const std::string& n : all)
            if (n == "o" || n == "lse") search.outputs.push_back(n);
        if (search.outputs.empty()) throw Error("a sample of rows scores o and lse: the dumps hold neither");
        result.sampled = true;
    } else {
        search.outputs = all;
    }

    // Round 0: every preset, writing the dump's output formats.
    std::vector<FitCandidate> ranked, beam;
    for (const std::string& p : starts) {
        FitCandidate c{.preset = p};
        for (const auto& [key, value] : search.formats)
            if (auto x = search.changed(c, key, value)) c = *x;
        if (auto scored = search.score(c)) insert_ranked(ranked, *scored, std::max(options.top, options.beam));
    }
    if (ranked.empty()) throw Error("no preset runs on these dumps; the first refused: " + search.first_refusal);
    beam = diverse_beam(ranked, options.beam);
    auto report = [&](int round) {
        if (options.progress) options.progress({round, search.evaluations, search.seconds(), &ranked.front()});
    };
    report(0);

    // Rounds: every single change of every beam member; where none enters the beam, pairs of
    // changes from the best of each preset in the beam (a choice that matters only with another:
    // P's format with P V's product, say). The search goes on while the beam moves: a line of
    // search below the leader may still be climbing past it.
    const std::size_t keep = std::max(options.top, options.beam);
    auto rounds = [&](int first) {
        for (int round = first;; ++round) {
            result.rounds = round;
            if (ranked.front().matched == ranked.front().total) return std::string("every bit matches");
            // heads: the best of each preset in the beam; pool: the beam and what this round
            // scored (the next beam's choice); singles: each head's best changes
            std::vector<FitCandidate> heads, pool = beam;
            for (const FitCandidate& c : beam)
                if (std::none_of(heads.begin(), heads.end(),
                                 [&](const FitCandidate& h) { return h.preset == c.preset; }))
                    heads.push_back(c);
            std::vector<std::vector<FitCandidate>> singles(heads.size());
            auto take = [&](const FitCandidate& c) {
                insert_ranked(pool, c, std::numeric_limits<std::size_t>::max());
                insert_ranked(ranked, c, keep);
            };
            auto moved = [&] { return !same_members(diverse_beam(pool, options.beam), beam); };
            for (const FitCandidate& base : beam) {
                const auto head = std::find_if(heads.begin(), heads.end(),
                                               [&](const FitCandidate& h) { return same_recipe(h, base); });
                for (const emu::RecipeKey* k : keys)
                    for (const std::string& v : k->values)
                        if (auto c = search.changed(base, k->key, v))
                            if (auto scored = search.score(*c)) {
                                take(*scored);
                                if (head != heads.end()) insert_ranked(singles[head - heads.begin()], *scored, 8);
                            }
            }
            // No single change moves the beam: two at once from each head, first of its best
            // changes, then every pair of values of two keys of one stage.
            const bool singles_moved = moved();
            for (std::size_t h = 0; h < heads.size() && !singles_moved; ++h)
                for (std::size_t i = 0; i < singles[h].size(); ++i)
                    for (std::size_t j = i + 1; j < singles[h].size(); ++j) {
                        std::optional<FitCandidate> c = singles[h][i];
                        for (const auto& [key, value] : singles[h][j].settings)
                            if (auto x = search.changed(*c, key, value)) c = x;
                        if (c->settings == singles[h][i].settings) continue;
                        if (auto scored = search.score(*c)) take(*scored);
                    }
            for (std::size_t h = 0; h < heads.size() && !singles_moved && !moved(); ++h)
                for (std::size_t x = 0; x < keys.size() && !moved(); ++x)
                    for (std::size_t y = x + 1; y < keys.size(); ++y) {
                        if (keys[x]->stage != keys[y]->stage) continue;
                        for (const std::string& vx : keys[x]->values)
                            for (const std::string& vy : keys[y]->values)
                                if (auto c = search.changed(heads[h], keys[x]->key, vx))
                                    if (auto both = search.changed(*c, keys[y]->key, vy))
                                        if (auto scored = search.score(*both)) take(*scored);
                    }
            std::vector<FitCandidate> next = diverse_beam(pool, options.beam);
            const bool any_moved = !same_members(next, beam);
            beam = std::move(next);
            report(round);
            if (search.out_of_budget())
                return std::string(search.evaluations >= options.max_evaluations ? "the evaluation limit"
                                                                                 : "the time limit");
            if (!any_moved) return std::string("no change of one or two keys helps");
        }
    };
    result.stopped = rounds(1);
    result.best = ranked.front();
    if (result.sampled) {
        const std::optional<FitCandidate> confirmed = search.confirm(ranked.front(), all);
        const std::string best_refusal = confirmed ? "" : search.last_refusal;
        if (confirmed) result.best = *confirmed;
        if (!confirmed || (result.best.matched != result.best.total && !search.out_of_budget())) {
            // The sample matches where every row does not: the search goes on over every row,
            // from the best it found.
            search.use_every_row(all);
            std::vector<FitCandidate> rescored;
            for (const FitCandidate& c : ranked)
                if (auto x = search.score(c)) insert_ranked(rescored, *x, keep);
            if (!rescored.empty()) {
                ranked = rescored;
                beam = diverse_beam(ranked, options.beam);
                result.stopped = rounds(result.rounds + 1);
                result.best = ranked.front();
            } else if (!confirmed) {
                // the sample scores o and lse only: its best may have no backward where the dumps hold gradients
                std::string best = "recipe " + ranked.front().preset;
                for (const auto& [key, value] : ranked.front().settings) best += " " + key + "=" + value;
                throw Error(
                    fmt::format("no candidate runs on every row and output: the best on the sampled rows "
                                "({}) refused: {}; to fit its forward alone, score the outputs o and lse only",
                                best, best_refusal));
            }
            result.sampled = false;
        }
    }
    if (result.best.matched != result.best.total && options.explain_rows > 0)
        // every key the outputs depend on, not only those searched: the step may be one left out
        result.divergence = find_divergence(dumps, result.best, keys_searched(search.table(), {}, gradients),
                                            options.threads, options.explain_rows);
    if (ranked.size() > options.top) ranked.resize(options.top);
    result.ranked = std::move(ranked);
    result.evaluations = search.evaluations;
    result.refused = search.refused;
    result.seconds = search.seconds();
    return result;
}

}  // namespace roundscope::analysis
