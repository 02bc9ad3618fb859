// `roundscope demo [--out DIR] [--no-plots] [--json] [--threads N]`: the main job on its
// embedded default. One synthetic scenario per failure (analysis/demo.hpp), a one-screen
// report, DIR/demo.json, and each pass's PNG plot (tools/cli/plot_output.hpp; without
// matplotlib the plots are skipped with a note).
#include <fmt/format.h>

#include <filesystem>
#include <span>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/demo.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "tools/cli/analysis_json.hpp"
#include "tools/cli/cli_output.hpp"
#include "tools/cli/command_files.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/option_checks.hpp"
#include "tools/cli/plot_output.hpp"

namespace roundscope::cli {
namespace {

struct DemoArgs {
    std::string out = "roundscope-demo";
    bool no_plots = false, json = false;
    int threads = 0;
};

nlohmann::json scenario_json(const analysis::SyntheticSpec& s) {
    nlohmann::json j{{"scenario", analysis::scenario_name(s.scenario)}, {"heads", s.heads}, {"n", s.n}, {"d", s.d},
                     {"seed", s.seed}};
    if (s.scenario == analysis::Scenario::sink) j["k_sink"] = s.k_sink, j["sink_strength"] = s.sink_strength;
    if (s.scenario == analysis::Scenario::wide) j["spread"] = s.spread;
    if (s.d_model > 0) j["d_model"] = s.d_model;
    return j;
}

nlohmann::json report_json(const analysis::DemoReport& r) {
    nlohmann::json bias = nlohmann::json::array();
    for (const auto& b : r.bias) bias.push_back(bias_json(b));
    const analysis::QueryWeightSteps& q = r.bias_steps.query_weight;
    nlohmann::json pcollapse = pcollapse_json(r.pcollapse, false), headroom = headroom_json(r.headroom, true);
    pcollapse["input"] = scenario_json(r.pcollapse_scenario);
    headroom["input"] = scenario_json(r.headroom_scenario);
    return {{"pcollapse", pcollapse},
            {"bias",
             {{"input", scenario_json(r.bias_scenario)},
              {"recipes", bias},
              {"cumulative_recipe", r.bias_steps_recipe},
              {"cumulative_coefficient", json_numbers(r.bias_steps.cumulative_coefficient)},
              {"cumulative_dwq_error_norm", json_numbers(q.cumulative_norm())},
              {"dwq_error_coherence", json_number(q.coherence())}}},
            {"leak",
             {{"input", scenario_json(r.leak_scenario)},
              {"recipe", r.leak_recipe},
              {"without_fix", leak_json(r.leak)},
              {"with_fix", leak_json(r.leak_fixed)}}},
            {"headroom", headroom}};
}

// Each pass's plot into out/KIND.png.
std::string draw_plots(const nlohmann::json& report, const std::string& out) {
    draw_plot("pcollapse", report["pcollapse"], out + "/pcollapse.png");
    draw_plot("bias", report["bias"], out + "/bias.png");
    draw_plot("leak", {{"runs", {report["leak"]["without_fix"], report["leak"]["with_fix"]}}}, out + "/leak.png");
    draw_plot("headroom", report["headroom"], out + "/headroom.png");
    return fmt::format("plots: {}/{{pcollapse,bias,leak,headroom}}.png", out);
}

const analysis::PCollapseRun& run_of(const analysis::PCollapseResult& r, emu::KvOrder order, float scale) {
    for (const auto& x : r.runs)
        if (x.order == order && x.scale == scale) return x;
    throw Error("demo: a P-collapse run is missing");
}

void print_report(const analysis::DemoReport& r) {
    fmt::print("roundscope demo: four failures of low-precision attention, each on a synthetic head\n\n");
    const auto &f1 = run_of(r.pcollapse, emu::KvOrder::forward, 1),
               &r256 = run_of(r.pcollapse, emu::KvOrder::reverse, 256);
    fmt::print("1. FP8 P-collapse (E4M3 P behind an attention sink, Delta = {:g}, N = {})\n",
               r.pcollapse_scenario.sink_strength, r.pcollapse_scenario.n);
    fmt::print(
        "   forward KV order, S = 1:   {:6.2f}% of non-sink P cast to zero (predicted {:.2f}%; closed form {:.2f}%)\n",
        100 * f1.underflow_fraction, 100 * f1.predicted_fraction, 100 * f1.closed_form_fraction.value_or(0));
    fmt::print("   reverse KV order, S = 256: {:6.2f}%   (MSE of O {:.2e} -> {:.2e})\n", 100 * r256.underflow_fraction,
               f1.mse, r256.mse);
    fmt::print(
        "\n2. BF16 rounding bias of delta = rowsum(dO * O) (two keys tie for the max, V and dO mostly negative; "
        "N = {})\n",
        r.bias_scenario.n);
    for (const auto& b : r.bias)
        fmt::print("   {:38} sum of delta errors {:+.3e}  t = {:+6.2f}  P-bar = 1: {} entries\n", b.recipe,
                   b.coefficient_sum, b.t_statistic, b.p_bar_one_count);
    const analysis::BiasSteps& steps = r.bias_steps;
    if (!steps.cumulative_coefficient.empty())
        fmt::print("   {} over {} steps: {:+.3e} accumulated\n", r.bias_steps_recipe, steps.steps.size(),
                   steps.cumulative_coefficient.back());
    if (const auto& q = r.bias.front().query_weight)
        fmt::print(
            "   its dW^Q part (q = x W^Q): rank-1 terms x[T]^T (PK)[T] with mean cosine {:.2f}; over the steps |sum| = "
            "{:.2f} of the sum of norms\n",
            q->rank1_mean_cosine, steps.query_weight.coherence());
    fmt::print("\n3. Future leakage of {} V ({} tokens share a scale, causal, N = {})\n", r.leak.format,
               r.leak.block, r.leak.tokens);
    fmt::print("   no fix:       {} leaking pairs, parallel vs autoregressive max |diff| {:.3g}\n",
               r.leak.leaking_pairs, r.leak.parallel_vs_autoregressive_max_abs_diff);
    fmt::print("   diagonal fix: {} leaking pairs, parallel vs autoregressive max |diff| {:.3g}\n",
               r.leak_fixed.leaking_pairs, r.leak_fixed.parallel_vs_autoregressive_max_abs_diff);
    // q and k with standard deviation `spread` give scores q.k / sqrt(D) with deviation spread^2.
    const double score_sd = r.headroom_scenario.spread * r.headroom_scenario.spread;
    fmt::print("\n4. Softmax overflow ({} rows, scores with standard deviation {:.1f})\n", r.headroom.rows.size(),
               score_sd);
    for (const auto& f : r.headroom.formats)
        fmt::print(
            "   {:4}: naive without max subtraction {} rows NaN/Inf (max score > {:.2f}: {}); with it {}; online {}\n",
            f.format, f.emulated_naive_nonfinite_rows, f.ln_max, f.naive_exp_overflow_rows,
            f.emulated_shifted_nonfinite_rows, f.emulated_online_nonfinite_rows);
}

// The output folder made and proved writable before the work. Without matplotlib the plots
// are skipped with a note (the report does not need them); returns that note, or empty.
std::string prepare_output(const DemoArgs& a) {
    std::error_code ec;
    std::filesystem::create_directories(a.out, ec);
    if (ec) throw Error("--out: cannot create '" + a.out + "': " + ec.message());
    const std::string json = (std::filesystem::path(a.out) / "demo.json").string();
    check_output("--out", json, {});
    if (a.no_plots) return "plots skipped (--no-plots)";
    try {
        check_plot((std::filesystem::path(a.out) / "bias.png").string(), {});
    } catch (const Error& e) {
        return fmt::format("plots skipped ({})", e.what());
    }
    return {};
}

void run(const DemoArgs& a) {
    const std::string skipped = prepare_output(a);
    const analysis::DemoReport r = analysis::run_demo(a.threads);
    const nlohmann::json j = report_json(r);
    const std::string text = j.dump(1) + "\n";
    const std::span<const std::byte> bytes = std::as_bytes(std::span(text));
    write_file((std::filesystem::path(a.out) / "demo.json").string(), std::span(&bytes, 1));
    const std::string plots = skipped.empty() ? draw_plots(j, a.out) : skipped;
    if (a.json) {
        print_json(j);
        return;
    }
    print_report(r);
    fmt::print("\nwrote {}/demo.json; {}\n", a.out, plots);
}

}  // namespace

void add_demo_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("demo", "The four failures on synthetic heads: a report, JSON and plots");
    auto a = std::make_shared<DemoArgs>();
    cmd->add_option("--out", a->out, "Output folder")->capture_default_str();
    cmd->add_flag("--no-plots", a->no_plots, "Do not draw the PNG plots");
    cmd->add_flag("--json", a->json, "Print the report as one JSON object");
    cmd->add_option("--threads", a->threads, "Worker threads (0: all cores)")->check(thread_count())->capture_default_str();
    cmd->footer("Example: roundscope demo --out roundscope-demo\n");
    cmd->callback([a] { run(*a); });
}

}  // namespace roundscope::cli
