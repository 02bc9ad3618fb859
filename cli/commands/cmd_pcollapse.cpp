// `roundscope pcollapse (IN | --synthetic) [--scale S]... [--order forward|reverse|both]
// [--sweep-scale] [--recipe NAME] [--set KEY=VALUE]... [--json]`; synthetic: --n, --d, --k-sink,
// --sink-strength, --seed. FP8 P-cast underflow (analysis/pcollapse.hpp).
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/pcollapse.hpp"
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

struct PCollapseArgs {
    InputFlags input;
    AttentionFlags flags;
    std::string order = "both", plot;
    // the paper's set-up: float32 Q, K, V, only P cast to E4M3 (`--recipe fp8-forward-order` or
    // `--set input=e4m3` for a kernel that also holds its inputs in E4M3)
    RecipeFlags recipe{"fp8-p-cast-only"};
    std::vector<float> scales;
    bool sweep = false, without_sink = false;

    PCollapseArgs() {
        input.spec.scenario = analysis::Scenario::sink;
        input.spec.n = 1024;
    }
};

void print_report(const PCollapseArgs& a, const analysis::PCollapseOptions& o, const analysis::PCollapseResult& r) {
    fmt::print("P-collapse, recipe {} (k_sink {}, delta_k {:.4f}{})\n", o.recipe.name, o.k_sink, r.delta_k,
               o.sink_strength ? fmt::format(", nominal Delta {}", *o.sink_strength) : "");
    fmt::print(
        "the scores as the kernel holds them: effective Delta {:.3f} (sink scores above the row mean, in units of "
        "the score spread {:.3f}); mass on the sink {:.3f}\n",
        r.sink_strength, r.score_spread, r.sink_mass);
    const auto optional_fraction = [](const std::optional<double>& x) {
        return x ? fmt::format("{:.4f}", *x) : std::string("-");
    };
    std::vector<std::vector<std::string>> rows;
    for (const auto& x : r.runs) {
        std::vector<std::string> row{std::string(emu::kv_order_name(x.order)),
                                     fmt::format("{}", x.scale),
                                     fmt::format("{:.4f}", x.underflow_fraction),
                                     optional_fraction(x.underflow_without_sink),
                                     fmt::format("{:.4f}", x.predicted_fraction),
                                     fmt::format("{:.4f}", x.predicted_fraction_empirical),
                                     optional_fraction(x.closed_form_fraction),
                                     optional_fraction(x.predicted_fraction_averaged),
                                     fmt::format("{:.2f}", x.delta_c),
                                     fmt::format("{:.3e}", x.mse),
                                     x.mse_gain_over_forward ? fmt::format("{:.2f}x", *x.mse_gain_over_forward) : "-",
                                     std::to_string(x.saturated)};
        if (a.sweep) {
            const analysis::ScaleProperties p = analysis::scale_properties(x.scale, *r.p_format);
            row.push_back(p.exact ? "yes" : "no");
            row.push_back(p.saturates ? "yes" : "no");
            row.push_back(fmt::format("{:.2f}", p.normal_octaves));
            row.push_back(fmt::format("{:.4f}", p.dp));
        }
        rows.push_back(row);
    }
    std::vector<std::string> headers{"order",       "S",        "underflow", "without sink", "predicted", "from scores",
                                     "closed form", "averaged", "Delta_c",   "MSE of O",     "MSE gain",  "saturated"};
    if (a.sweep) headers.insert(headers.end(), {"exact S", "saturates", "normal octaves", "dp(S)"});
    print_table(headers, rows);
    if (r.heads.size() < 2) return;
    // per head: the measured sink, then each run's underflow with its prediction
    fmt::print("\nper head (underflow / predicted / from scores):\n");
    std::vector<std::string> head_headers{"head", "Delta", "spread", "sink mass"};
    for (const auto& x : r.runs) head_headers.push_back(fmt::format("{} S={}", emu::kv_order_name(x.order), x.scale));
    std::vector<std::vector<std::string>> head_rows;
    for (const auto& h : r.heads) {
        std::vector<std::string> row{std::to_string(h.head), fmt::format("{:.3f}", h.sink_strength),
                                     fmt::format("{:.3f}", h.score_spread), fmt::format("{:.3f}", h.sink_mass)};
        for (const auto& x : h.runs)
            row.push_back(fmt::format("{:.4f} / {:.4f} / {:.4f}", x.underflow_fraction, x.predicted_fraction,
                                      x.predicted_fraction_empirical));
        head_rows.push_back(row);
    }
    print_table(head_headers, head_rows);
}

void run(const PCollapseArgs& a) {
    api::PCollapseRequest request;
    request.input = {a.input.source("pcollapse"), a.flags.problem(), a.flags.threads};
    request.recipe = a.recipe.choice();
    request.scales.assign(a.scales.begin(), a.scales.end());
    request.order = a.order, request.sweep_scale = a.sweep, request.without_sink = a.without_sink;
    const analysis::PCollapseOptions o = api::pcollapse_options(request);  // checked before the plot's path
    check_plot(a.plot, {a.input.file});
    const api::Answer answer = api::pcollapse(request);
    const auto& r = answer.result;
    output_analysis(
        "pcollapse", answer.json, a.flags.json, [&] { print_report(a, o, r); }, a.plot);
}

}  // namespace

void add_pcollapse_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("pcollapse", "FP8 P-cast underflow behind an attention sink (P-collapse)");
    auto a = std::make_shared<PCollapseArgs>();
    a->input.add_to(cmd, "File with q, k, v");
    cmd->add_option("--scale", a->scales, "Static P scale S (repeatable; default 1 and 256)")
        ->check(finite_in(api::ranges::p_scale));
    cmd->add_option("--order", a->order, "forward, reverse or both")->capture_default_str();
    cmd->add_flag("--without-sink", a->without_sink,
                  "Also each run with the sink keys replaced by their neighbour: the underflow the spread of "
                  "scores causes alone");
    cmd->add_flag("--sweep-scale", a->sweep,
                  "S over powers of two, 448 and scales between them, with what each means on the P format's grid "
                  "(saturation, normal octaves, dp(S))");
    a->recipe.add_to(cmd,
                     "The FP8 recipe (default: the paper's set-up, float32 Q, K, V and only P in E4M3; "
                     "fp8-forward-order for E4M3 inputs too)");
    cmd->add_option("--k-sink", a->input.spec.k_sink, "Sink tokens (the first keys)")
        ->check(integer_in(api::ranges::k_sink))
        ->capture_default_str();
    a->input
        .synthetic_only(cmd->add_option("--sink-strength", a->input.spec.sink_strength,
                                        "Delta: how far the sink scores stand above the rest (synthetic)"))
        ->check(finite_in(api::ranges::sink_strength))
        ->capture_default_str();
    a->flags.add_to(cmd);
    add_plot_flag(cmd, a->plot);
    cmd->footer("Example: roundscope pcollapse --synthetic --sink-strength 8 --n 1024\n");
    cmd->callback([a] { run(*a); });
}

}  // namespace roundscope::cli
