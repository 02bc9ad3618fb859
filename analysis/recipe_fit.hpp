#pragma once
// `roundscope fit`'s work: which recipe reproduces a kernel's outputs bit for bit? A beam search
// over the recipe space scored by the bits each candidate matches: every preset first, then
// each key over the values its domain lists (recipe_key_table), one change at a time from a
// beam that holds more than one preset, then pairs of the most promising changes where no single
// one moves the beam. The cost grows with the number of keys and values, not their product. A
// sample of query rows keeps each evaluation cheap; the winner is confirmed on every row.
// Several dumps are fitted together.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/attention_run.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"
#include "lib/tensor.hpp"

namespace roundscope::analysis {

/// One output's matched bit patterns of its total.
struct OutputScore {
    std::string name;
    std::uint64_t matched = 0, total = 0;
};

/// A recipe the search scored: a preset and the settings changed from it.
struct FitCandidate {
    std::string preset;
    std::vector<std::pair<std::string, std::string>> settings;  // KEY, VALUE, in the key table's order
    std::vector<OutputScore> outputs;
    std::uint64_t matched = 0, total = 0;
    emu::AttentionRecipe recipe() const;  // the preset with the settings applied
};

/// Where the search stands, after each round (for a progress line).
struct FitProgress {
    int round = 0;
    std::size_t evaluations = 0;
    double seconds = 0;
    const FitCandidate* best = nullptr;
};

/// One dump the search fits: the kernel's outputs in `file`, the inputs found in it (`in`), and
/// how they run.
struct FitDump {
    const TensorFile* file = nullptr;
    emu::AttentionInputs in;
    bool causal = false;
    double scale = 0;  // 0: 1/sqrt(D)
};

struct FitOptions {
    int threads = 0;
    std::vector<std::string> outputs;  // those scored (empty: every output the dump holds)
    std::vector<std::string> presets;  // where the search starts (empty: every preset)
    std::vector<std::string> keys;     // the keys it changes (empty: every key the outputs depend on)
    std::uint64_t rows = 0;            // query rows a head searched on (0: every row); the winner is
                                       // confirmed on every row. Gradients need every row: with dq, dk
                                       // or dv scored, the sample scores o and lse only
    std::uint64_t seed = 0;            // the sample's
    std::size_t beam = 4;              // candidates kept from round to round
    std::size_t max_evaluations = 6000;
    double max_seconds = 0;           // 0: no limit
    std::size_t top = 8;              // candidates reported
    std::uint64_t explain_rows = 32;  // differing rows each change is tried on where no recipe matches (0: none)
    std::function<void(const FitProgress&)> progress;
};

/// One change of the recipe and the sampled rows it makes match.
struct RowExplanation {
    std::string stage, key, value;
    std::uint64_t rows = 0;
};

/// Where inside a differing row the kernel and the recipe part, as far as the row's outputs tell:
/// the LSE is m + log l, fixed once the softmax's statistics are, so a row whose LSE differs parts
/// in the scores, the maximum, the exponentials or the row sum (or the log); a row whose LSE is
/// the kernel's but whose o differs parts after them (P's cast, P V, the rescale, the final
/// division or o's cast); without an LSE in the dump a row cannot be split.
struct RowSteps {
    std::uint64_t statistics = 0;  // the LSE differs
    std::uint64_t after = 0;       // the LSE is the kernel's, o differs
    std::uint64_t unsplit = 0;     // o differs, the dump holds no LSE
};

struct Divergence {
    std::uint64_t rows = 0, rows_total = 0;  // query rows (every head of every dump) with a differing o or lse bit
    RowSteps steps;                          // those rows by where in the row they part
    std::uint64_t sampled = 0;               // of them, those each change was tried on
    // The first differing element: its dump, output and index, the kernel's and the recipe's values.
    std::string file, output;
    Shape index;
    double kernel = 0, recipe = 0;
    std::vector<RowExplanation> explanations;  // changes that fix a sampled row, most rows first
};

struct FitResult {
    FitCandidate best;                 // confirmed on every row
    std::vector<FitCandidate> ranked;  // the best `top` the search scored (on its sample), best first
    std::size_t evaluations = 0;       // recipes scored, the confirmation included
    std::size_t refused = 0;           // candidates the emulator cannot run on these inputs (skipped)
    double seconds = 0;
    int rounds = 0;
    std::string stopped;  // "every bit matches", "no change of one or two keys helps",
                          // "the evaluation limit", "the time limit"
    bool sampled = false;
    std::optional<Divergence> divergence;  // where the best is not exact (o or lse scored)
};

/// The search on the kernel outputs of every dump at once (their bits added: a recipe that fits
/// one shape may not fit another). Errors, before any work, for a dump without kernel outputs,
/// an output named that one does not hold, outputs of other dtypes in different dumps, an
/// unknown preset or key, or no preset that runs.
FitResult fit_recipe(const std::vector<FitDump>& dumps, const FitOptions& options);

/// Error unless every one of `keys` is a recipe key a search can change (not o_format or
/// grad_format, which a dump's own dtypes decide).
void check_fit_keys(const std::vector<std::string>& keys);

}  // namespace roundscope::analysis
