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

struct PCollapseArgs {
    std::string input, order = "both", plot;
    RecipeFlags recipe{"fp8-forward-order"};
    std::vector<float> scales;
    bool synthetic = false, sweep = false, json = false, causal = false;
    std::uint64_t n = 1024, d = 64, seed = 0;
    int k_sink = 4, threads = 0;
    double sink_strength = 8;
};

std::vector<emu::KvOrder> orders_of(const std::string& s) {
    if (s == "both") return {emu::KvOrder::forward, emu::KvOrder::reverse};
    return {emu::parse_kv_order(s, "--order (or both)")};
}

void print_report(const PCollapseArgs& a, const analysis::PCollapseOptions& o, const analysis::PCollapseResult& r) {
    fmt::print("P-collapse, recipe {} (k_sink {}, delta_k {:.4f}{})\n", o.recipe.name, a.k_sink, r.delta_k,
               a.synthetic ? fmt::format(", Delta {}", a.sink_strength) : "");
    std::vector<std::vector<std::string>> rows;
    for (const auto& x : r.runs) {
        std::vector<std::string> row{
            std::string(emu::kv_order_name(x.order)),
            fmt::format("{}", x.scale),
            fmt::format("{:.4f}", x.underflow_fraction),
            x.predicted_fraction ? fmt::format("{:.4f}", *x.predicted_fraction) : "-",
            x.predicted_fraction_averaged ? fmt::format("{:.4f}", *x.predicted_fraction_averaged) : "-",
            fmt::format("{:.2f}", x.delta_c),
            fmt::format("{:.3e}", x.mse),
            std::to_string(x.saturated)};
        if (a.sweep) {
            const analysis::ScaleProperties p = analysis::scale_properties(x.scale);
            row.push_back(p.exact ? "yes" : "no");
            row.push_back(fmt::format("{:.2f}", p.normal_octaves));
        }
        rows.push_back(row);
    }
    std::vector<std::string> headers{"order",    "S",       "underflow", "predicted",
                                     "averaged", "Delta_c", "MSE of O",  "saturated"};
    if (a.sweep) headers.insert(headers.end(), {"exact S", "normal octaves"});
    print_table(headers, rows);
}

void run(const PCollapseArgs& a) {
    analysis::PCollapseOptions o;
    o.recipe = a.recipe.recipe();
    o.orders = orders_of(a.order);
    o.k_sink = a.k_sink;
    o.threads = a.threads;
    if (!a.scales.empty()) o.scales = a.scales;
    if (a.sweep) o.scales = {1, 2, 4, 8, 16, 32, 64, 128, 256, 448, 512, 1024};
    analysis::SyntheticSpec spec;
    spec.scenario = analysis::Scenario::sink;
    spec.n = a.n, spec.d = a.d, spec.seed = a.seed, spec.k_sink = a.k_sink, spec.sink_strength = a.sink_strength;
    const ChosenInputs c = choose_inputs("pcollapse", a.input, a.synthetic, spec, a.causal);
    if (a.synthetic) o.sink_strength = a.sink_strength;
    o.causal = c.causal, o.softmax_scale = c.softmax_scale;
    const analysis::PCollapseResult r = naming_input(a.input, [&] { return analysis::pcollapse(c.in, o); });
    nlohmann::json j = pcollapse_json(r, a.sweep);
    j["recipe"] = o.recipe.name, j["k_sink"] = a.k_sink;
    if (a.json)
        fmt::print("{}\n", j.dump());
    else
        print_report(a, o, r);
    if (!a.plot.empty()) draw_plot("pcollapse", j, a.plot);
}

}  // namespace

void add_pcollapse_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("pcollapse", "FP8 P-cast underflow behind an attention sink (P-collapse)");
    auto a = std::make_shared<PCollapseArgs>();
    cmd->add_option("IN", a->input, "File with q, k, v");
    add_synthetic_flags(cmd, a->synthetic, a->n, a->d, a->seed);
    cmd->add_option("--scale", a->scales, "Static P scale S (repeatable; default 1 and 256)")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--order", a->order, "forward, reverse or both");
    cmd->add_flag("--sweep-scale", a->sweep, "S over powers of two and 448, with what each means on the E4M3 grid");
    a->recipe.add_to(cmd, "The FP8 recipe");
    cmd->add_option("--k-sink", a->k_sink, "Sink tokens")->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--sink-strength", a->sink_strength,
                    "Delta: how far the sink scores stand above the rest (synthetic)");
    cmd->add_flag("--causal", a->causal, "Causal mask");
    add_output_flags(cmd, a->json, a->threads);
    add_plot_flag(cmd, a->plot);
    cmd->callback([a] { run(*a); });
}

}  // namespace roundscope::cli
