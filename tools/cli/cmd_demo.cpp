// `roundscope demo [--out DIR] [--no-plots] [--json] [--threads N]`: the main job on its
// embedded default. One synthetic scenario per failure (analysis/demo.hpp), a one-screen
// report, DIR/demo.json, and PNG plots drawn by tools/python/roundscope_plot.py (matplotlib,
// installed in .venv by tools/setup.sh; without it the plots are skipped with a note).
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/demo.hpp"
#include "lib/error.hpp"
#include "tools/cli/analysis_json.hpp"
#include "tools/cli/commands.hpp"

namespace roundscope::cli {
namespace {

struct DemoArgs {
    std::string out = "roundscope-demo";
    bool no_plots = false, json = false;
    int threads = 0;
};

nlohmann::json report_json(const analysis::DemoReport& r) {
    nlohmann::json bias = nlohmann::json::array();
    for (const auto& b : r.bias) bias.push_back(bias_json(b));
    nlohmann::json bias_cumulative(r.bias_cumulative);
    return {{"pcollapse", pcollapse_json(r.pcollapse, false)},
            {"bias", {{"recipes", bias}, {"cumulative_recipe", "fa2-bf16-torch"}, {"cumulative_coefficient", bias_cumulative}}},
            {"leak", {{"without_fix", leak_json(r.leak)}, {"with_fix", leak_json(r.leak_fixed)}}},
            {"headroom", headroom_json(r.headroom, true)}};
}

// Runs the plot script with the project's Python, else python3 from PATH; a note if it fails.
std::string draw_plots(const std::string& out) {
    const std::filesystem::path source(ROUNDSCOPE_SOURCE_DIR);
    const std::filesystem::path venv = source / ".venv" / "bin" / "python";
    const std::string python = std::filesystem::exists(venv) ? venv.string() : "python3";
    const std::string command = fmt::format("\"{}\" \"{}\" \"{}\" > /dev/null 2>&1", python,
                                            (source / "tools" / "python" / "roundscope_plot.py").string(), out);
    if (std::system(command.c_str()) != 0) return "plots skipped: tools/python/roundscope_plot.py needs matplotlib (tools/setup.sh installs it)";
    return fmt::format("plots: {}/{{pcollapse,bias,leak,headroom}}.png", out);
}

const analysis::PCollapseRun& run_of(const analysis::PCollapseResult& r, emu::KvOrder order, float scale) {
    for (const auto& x : r.runs)
        if (x.order == order && x.scale == scale) return x;
    throw Error("demo: a P-collapse run is missing");
}

void print_report(const analysis::DemoReport& r) {
    fmt::print("roundscope demo: four failures of low-precision attention, each on a synthetic head\n\n");
    const auto& f1 = run_of(r.pcollapse, emu::KvOrder::forward, 1), &r256 = run_of(r.pcollapse, emu::KvOrder::reverse, 256);
    fmt::print("1. FP8 P-collapse (E4M3 P behind an attention sink, Delta = 8, N = 1024)\n");
    fmt::print("   forward KV order, S = 1:   {:6.2f}% of non-sink P cast to zero (predicted {:.2f}%; closed form {:.2f}%)\n",
               100 * f1.underflow_fraction, 100 * f1.predicted_fraction_averaged.value_or(0), 100 * f1.predicted_fraction.value_or(0));
    fmt::print("   reverse KV order, S = 256: {:6.2f}%   (MSE of O {:.2e} -> {:.2e})\n", 100 * r256.underflow_fraction, f1.mse, r256.mse);
    fmt::print("\n2. BF16 rounding bias of delta = rowsum(dO * O) (two keys tie for the max, V and dO mostly negative)\n");
    for (const auto& b : r.bias)
        fmt::print("   {:38} sum of delta errors {:+.3e}  t = {:+6.2f}  P-bar = 1: {} entries\n", b.recipe, b.coefficient_sum,
                   b.t_statistic, b.p_bar_one_count);
    if (!r.bias_cumulative.empty())
        fmt::print("   fa2-bf16-torch over {} steps: {:+.3e} accumulated\n", r.bias_cumulative.size(), r.bias_cumulative.back());
    fmt::print("\n3. Future leakage of MXFP4 V (32 tokens share a scale, causal, N = {})\n", r.leak.tokens);
    fmt::print("   no fix:       {} leaking pairs, parallel vs autoregressive max |diff| {:.3g}\n", r.leak.leaking_pairs,
               r.leak.parallel_vs_autoregressive_max_abs_diff);
    fmt::print("   diagonal fix: {} leaking pairs, parallel vs autoregressive max |diff| {:.3g}\n", r.leak_fixed.leaking_pairs,
               r.leak_fixed.parallel_vs_autoregressive_max_abs_diff);
    fmt::print("\n4. Softmax overflow ({} rows, scores with standard deviation 3.2)\n", r.headroom.rows.size());
    for (const auto& f : r.headroom.formats)
        fmt::print("   {:4}: naive without max subtraction {} rows NaN/Inf (max score > {:.2f}: {}); with it {}; online {}\n", f.format,
                   f.emulated_naive_nonfinite_rows, f.ln_max, f.naive_exp_overflow_rows, f.emulated_shifted_nonfinite_rows,
                   f.emulated_online_nonfinite_rows);
}

void run(const DemoArgs& a) {
    const analysis::DemoReport r = analysis::run_demo(a.threads);
    std::error_code ec;
    std::filesystem::create_directories(a.out, ec);
    if (ec) throw Error("--out: cannot create '" + a.out + "': " + ec.message());
    const nlohmann::json j = report_json(r);
    {
        std::ofstream file(std::filesystem::path(a.out) / "demo.json");
        if (!file) throw Error("--out: cannot write '" + a.out + "/demo.json'");
        file << j.dump(1) << "\n";
    }
    const std::string plots = a.no_plots ? "plots skipped (--no-plots)" : draw_plots(a.out);
    if (a.json) {
        fmt::print("{}\n", j.dump());
        return;
    }
    print_report(r);
    fmt::print("\nwrote {}/demo.json; {}\n", a.out, plots);
}

}  // namespace

void add_demo_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("demo", "The four failures on synthetic heads: a report, JSON and plots");
    auto a = std::make_shared<DemoArgs>();
    cmd->add_option("--out", a->out, "Output folder (default ./roundscope-demo)");
    cmd->add_flag("--no-plots", a->no_plots, "Do not draw the PNG plots");
    cmd->add_flag("--json", a->json, "Print the report as one JSON object");
    cmd->add_option("--threads", a->threads, "Worker threads (default: all cores)")->check(CLI::NonNegativeNumber);
    cmd->callback([a] { run(*a); });
}

}  // namespace roundscope::cli
