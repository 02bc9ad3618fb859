// `roundscope fit FILE... [--from PRESET]... [--keys K,...] [--outputs o,lse,...] [--rows K
// [--seed S]] [--beam B] [--max-evaluations N] [--max-seconds T] [--top N] [--causal|--no-causal]
// [--softmax-scale X] [--json] [--threads N]`: which recipe reproduces the kernel outputs in
// one or more dumps bit for bit (analysis/recipe_fit.hpp).
#include <fmt/format.h>

#include <deque>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/recipe_fit.hpp"
#include "api/fit_call.hpp"
#include "cli/analysis_flags.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/option_checks.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "lib/memory_budget.hpp"

namespace roundscope::cli {
namespace {

struct FitArgs {
    std::vector<std::string> inputs;
    std::string outputs, keys;
    std::vector<std::string> presets;
    AttentionFlags flags;
    analysis::FitOptions options;
};

std::vector<std::string> split_commas(const std::string& list) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = list.find(',', start);
        out.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) return out;
        start = comma + 1;
    }
}

double share(std::uint64_t matched, std::uint64_t total) {
    return total == 0 ? 1.0 : static_cast<double>(matched) / static_cast<double>(total);
}

/// "--recipe fa2-bf16 --set kv_order=reverse": the candidate as the options that run it.
std::string recipe_flags(const analysis::FitCandidate& c) {
    std::string s = "--recipe " + c.preset;
    for (const auto& [key, value] : c.settings) s += " --set " + key + "=" + value;
    return s;
}

void print_divergence(const analysis::Divergence& d) {
    fmt::print("where the best differs: {} of {} query rows; the first at {} {}{}: kernel {} recipe {}\n", d.rows,
               d.rows_total, d.file, d.output, shape_string(d.index), format_double(d.kernel), format_double(d.recipe));
    // where in those rows: one line, its parts only where rows are in them
    std::vector<std::string> parts;
    if (d.steps.statistics > 0)
        parts.push_back(
            fmt::format("{} in the softmax's statistics (their lse differs: scores, max, exp, row sum or "
                        "log)",
                        d.steps.statistics));
    if (d.steps.after > 0)
        parts.push_back(
            fmt::format("{} after them (lse equal, o differs: P's cast, P V, the rescale, the final "
                        "division or o's cast)",
                        d.steps.after));
    if (d.steps.unsplit > 0)
        parts.push_back(fmt::format("{} not split (o differs; the dump holds no lse to tell where)", d.steps.unsplit));
    fmt::print("where in the row: {}\n", fmt::join(parts, "; "));
    std::string s;
    for (const analysis::RowExplanation& e : d.explanations)
        s += fmt::format("{}{} {}={} ({})", s.empty() ? "" : ", ", e.stage, e.key, e.value, e.rows);
    // one line whatever it finds, so that the report's lines are the same in number
    fmt::print("single changes that make some of the {} sampled rows match: {}\n", d.sampled, s.empty() ? "none" : s);
}

std::string scores_text(const analysis::FitCandidate& c) {
    std::string s;
    for (const analysis::OutputScore& o : c.outputs)
        s += fmt::format("{}{} {:.4f} %", s.empty() ? "" : ", ", o.name, 100 * share(o.matched, o.total));
    return s;
}

void fit(FitArgs& a) {
    api::FitRequest request;
    for (const std::string& path : a.inputs) request.dumps.push_back(file_source(path));
    request.problem = a.flags.problem();
    request.presets = a.presets;
    if (!a.keys.empty()) request.keys = split_commas(a.keys);
    if (!a.outputs.empty()) request.outputs = a.outputs;
    request.options = a.options;
    request.options.threads = a.flags.threads;
    if (!a.flags.json)
        request.options.progress = [](const analysis::FitProgress& p) {
            fmt::print(stderr, "fit: round {}: {} recipes scored in {:.1f} s, the best {:.4f} % of the bits: {}\n",
                       p.round, p.evaluations, p.seconds, 100 * share(p.best->matched, p.best->total),
                       recipe_flags(*p.best));
        };
    const api::Answer answer = api::fit(request);
    if (a.flags.json) {
        print_json(answer.json);
        return;
    }
    const analysis::FitResult& r = answer.result;
    fmt::print("{}{}: {} recipes scored in {} round(s), {:.1f} s; stopped: {}\n", a.inputs.front(),
               a.inputs.size() > 1 ? fmt::format(" and {} more", a.inputs.size() - 1) : "", r.evaluations, r.rounds,
               r.seconds, r.stopped);
    std::vector<std::vector<std::string>> rows;
    for (std::size_t i = 0; i < r.ranked.size(); ++i)
        rows.push_back({std::to_string(i + 1),
                        fmt::format("{:.4f} %", 100 * share(r.ranked[i].matched, r.ranked[i].total)),
                        scores_text(r.ranked[i]), recipe_flags(r.ranked[i])});
    print_table({"rank", r.sampled ? "bits (sample)" : "bits", "by output", "recipe"}, rows);
    fmt::print("best, on every row: {} of {} bit patterns ({:.4f} %): {}\n", r.best.matched, r.best.total,
               100 * share(r.best.matched, r.best.total), recipe_flags(r.best));
    if (r.divergence) print_divergence(*r.divergence);
}

}  // namespace

void add_fit_command(CLI::App& app) {
    auto* cmd = app.add_subcommand(
        "fit", "Searches the recipes for the one that reproduces a dump's kernel outputs bit for bit");
    auto a = std::make_shared<FitArgs>();
    cmd->add_option("FILE", a->inputs,
                    "Dumps with q, k, v and what the kernel wrote: o (lse, and dq, dk, dv with do); several are "
                    "fitted together")
        ->required();
    cmd->add_option("--from", a->presets, "Start from this preset (repeat it; default: every preset)")
        ->check(accepted_by([](const std::string& s) { emu::find_recipe(s); }, "a preset"));
    cmd->add_option("--keys", a->keys, "Change only these recipe keys, comma-separated (default: every key)");
    cmd->add_option("--outputs", a->outputs, "Score only these outputs, comma-separated (default: all the dump holds)")
        ->check(accepted_by([](const std::string& s) { analysis::parse_output_names(s, ""); }, "o,lse,dq,dk,dv"));
    cmd->add_option("--rows", a->options.rows,
                    "Search on this many query rows a head (o and lse), and confirm the winner on every row")
        ->check(integer_in(api::ranges::fit_rows));
    cmd->add_option("--seed", a->options.seed, "The rows' seed")->capture_default_str()->check(seed_value());
    cmd->add_option("--beam", a->options.beam, "Candidates kept from round to round")
        ->capture_default_str()
        ->check(integer_in(api::ranges::beam));
    cmd->add_option("--max-evaluations", a->options.max_evaluations, "Stop after scoring this many recipes")
        ->capture_default_str()
        ->check(integer_in(api::ranges::max_evaluations));
    cmd->add_option("--max-seconds", a->options.max_seconds, "Stop after this many seconds (0: no limit)")
        ->capture_default_str()
        ->check(finite_in(api::ranges::max_seconds));
    cmd->add_option("--top", a->options.top, "Candidates listed")
        ->capture_default_str()
        ->check(integer_in(api::ranges::top));
    cmd->add_option("--explain-rows", a->options.explain_rows,
                    "Where no recipe matches: the differing rows each single change is tried on (0: none)")
        ->capture_default_str()
        ->check(integer_in(api::ranges::explain_rows));
    a->flags.add_to(cmd, "--softmax-scale,--scale");
    cmd->footer("Example: roundscope fit dump.safetensors --rows 64 --max-seconds 60\n");
    cmd->callback([a] { fit(*a); });
}

}  // namespace roundscope::cli
