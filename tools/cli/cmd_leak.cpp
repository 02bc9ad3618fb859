// `roundscope leak (IN | --synthetic [--n N] [--d D] [--seed S]) [--format BLOCKFMT]
// [--block 32] [--fix] [--recipe NAME] [--set KEY=VALUE]... [--max-tokens N] [--json]`: future
// leakage of V quantized along tokens (analysis/leak.hpp).
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/leak.hpp"
#include "analysis/synthetic_attention.hpp"
#include "lib/error.hpp"
#include "lib/tensor_io.hpp"
#include "tools/cli/analysis_flags.hpp"
#include "tools/cli/analysis_json.hpp"
#include "tools/cli/cli_output.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/recipe_flags.hpp"
#include "tools/cli/plot_output.hpp"

namespace roundscope::cli {
namespace {

struct LeakArgs {
    std::string input, format = "mxfp4", plot;
    RecipeFlags recipe{"mxfp4-v"};
    bool synthetic = false, fix = false, json = false;
    int block = 32, threads = 0;
    std::uint64_t n = 256, d = 64, seed = 0, max_tokens = 512;
};

void print_report(const analysis::LeakResult& r) {
    fmt::print("Future leakage, V in {} blocks of {} tokens along the sequence, {} ({} tokens, causal)\n", r.format,
               r.block, r.fix ? "diagonal block unquantized (fix)" : "no fix", r.tokens);
    print_table(
        {"measure", "value"},
        {{"leaking pairs (j > i changes O[i])", std::to_string(r.leaking_pairs)},
         {"max future influence on O", fmt::format("{:.4e}", r.max_future_influence)},
         {"parallel vs autoregressive, max |diff|", fmt::format("{:.4e}", r.parallel_vs_autoregressive_max_abs_diff)},
         {"rows moved by masked keys only", std::to_string(r.masked_contribution_violations)},
         {"(query, block) scales mixing masked positions", std::to_string(r.mixed_scale_blocks)}});
}

void run(const LeakArgs& a) {
    analysis::LeakOptions o;
    o.recipe = a.recipe.recipe();
    o.format = emu::find_block_format(a.format);
    if (o.format == nullptr) throw Error("--format: unknown block format '" + a.format + "'");
    o.block = a.block, o.fix = a.fix, o.max_tokens = a.max_tokens, o.threads = a.threads;
    analysis::SyntheticSpec spec;
    spec.n = a.n, spec.d = a.d, spec.seed = a.seed;
    const ChosenInputs c = choose_inputs("leak", a.input, a.synthetic, spec, true);
    o.softmax_scale = c.softmax_scale;
    const analysis::LeakResult r = naming_input(a.input, [&] { return analysis::leak(c.in, o); });
    const nlohmann::json j = leak_json(r);
    if (a.json)
        fmt::print("{}\n", j.dump());
    else
        print_report(r);
    if (!a.plot.empty()) draw_plot("leak", j, a.plot);
}

}  // namespace

void add_leak_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("leak", "Future leakage of V block-quantized along tokens (causal attention)");
    auto a = std::make_shared<LeakArgs>();
    cmd->add_option("IN", a->input, "File with q, k, v");
    add_synthetic_flags(cmd, a->synthetic, a->n, a->d, a->seed);
    cmd->add_option("--format", a->format, "Block format of V (default mxfp4)");
    cmd->add_option("--block", a->block, "Tokens per scale (default 32)")->check(CLI::Range(1, 1024));
    cmd->add_flag("--fix", a->fix, "The diagonal block of P multiplies unquantized V");
    a->recipe.add_to(cmd);
    cmd->add_option("--max-tokens", a->max_tokens, "Tokens of a file to analyse (default 512)")
        ->check(CLI::PositiveNumber);
    add_output_flags(cmd, a->json, a->threads);
    add_plot_flag(cmd, a->plot);
    cmd->callback([a] { run(*a); });
}

}  // namespace roundscope::cli
