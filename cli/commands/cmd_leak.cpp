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
#include "api/analyses.hpp"
#include "cli/analysis_flags.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/option_checks.hpp"
#include "cli/plot_output.hpp"
#include "cli/recipe_flags.hpp"
#include "lib/error.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::cli {
namespace {

struct LeakArgs {
    InputFlags input;
    AttentionFlags flags;
    std::string format = "mxfp4", plot;
    RecipeFlags recipe{"mxfp4-v"};
    bool fix = false, natural = false;
    int block = 32;
    std::uint64_t max_tokens = 512;
};

void print_report(const analysis::LeakResult& r) {
    if (r.format == "none")
        fmt::print("Future leakage, V unquantized, pairs within blocks of {} tokens ({} tokens, causal)\n", r.block,
                   r.tokens);
    else
        fmt::print("Future leakage, V in {} blocks of {} tokens along the sequence, {} ({} tokens, causal)\n", r.format,
                   r.block, r.fix ? "diagonal block unquantized (fix)" : "no fix", r.tokens);
    std::vector<std::vector<std::string>> rows{
        {"leaking pairs (V[j] x 16, j > i, changes O[i])", fmt::format("{} of {}", r.leaking_pairs, r.future_pairs)},
        {"max future influence on O", fmt::format("{:.4e}", r.max_future_influence)}};
    if (r.leaking_pairs_natural) {
        rows.push_back({"leaking pairs (token j another token)",
                        fmt::format("{} of {}", *r.leaking_pairs_natural, r.future_pairs)});
        rows.push_back({"max influence of another token", fmt::format("{:.4e}", *r.max_future_influence_natural)});
    }
    rows.push_back(
        {"parallel vs autoregressive, max |diff|", fmt::format("{:.4e}", r.parallel_vs_autoregressive_max_abs_diff)});
    rows.push_back({"rows moved by masked keys only", std::to_string(r.masked_contribution_violations)});
    rows.push_back({"(query, block) scales mixing masked positions", std::to_string(r.mixed_scale_blocks)});
    print_table({"measure", "value"}, rows);
}

void run(const LeakArgs& a) {
    // Leakage is a property of causal attention: the mask is always on.
    if (a.flags.no_causal) throw Error("--no-causal: leakage is measured under the causal mask");
    check_plot(a.plot, {a.input.file});
    api::LeakRequest request;
    request.input = {a.input.source("leak"), a.flags.problem(), a.flags.threads};
    request.format = a.format, request.block = a.block, request.fix = a.fix, request.natural = a.natural;
    request.recipe = a.recipe.choice(), request.max_tokens = a.max_tokens;
    const api::Answer answer = api::leak(request);
    const auto& r = answer.result;
    output_analysis(
        "leak", answer.json, a.flags.json, [&] { print_report(r); }, a.plot);
}

}  // namespace

void add_leak_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("leak", "Future leakage of V block-quantized along tokens (causal attention)");
    auto a = std::make_shared<LeakArgs>();
    a->input.add_to(cmd, "File with q, k, v");
    cmd->add_option("--format", a->format,
                    "Block format of V, or none (V unquantized: what the recipe's qk_quant or p_quant leak alone)")
        ->check(accepted_by(
            [](const std::string& name) {
                if (name != "none") emu::block_format_named(name);
            },
            "BLOCKFMT|none"))
        ->capture_default_str();
    cmd->add_option("--block", a->block, "Tokens per scale")
        ->check(integer_in(api::ranges::block))
        ->capture_default_str();
    cmd->add_flag("--fix", a->fix, "The diagonal block of P multiplies unquantized V");
    cmd->add_flag(
        "--natural", a->natural,
        "Also each later token j replaced by another (K and V rows of token (j + n/2) mod n), beside V[j] x 16");
    a->recipe.add_to(cmd);
    cmd->add_option("--max-tokens", a->max_tokens, "Tokens of a file to analyse")
        ->check(integer_in(api::ranges::max_tokens))
        ->capture_default_str();
    a->flags.add_to(cmd);
    add_plot_flag(cmd, a->plot);
    cmd->footer("Example: roundscope leak --synthetic --n 128 --format mxfp4 --fix\n");
    cmd->callback([a] { run(*a); });
}

}  // namespace roundscope::cli
