// `roundscope demo [--out DIR] [--no-plots] [--json] [--threads N]`: the main job on its
// embedded default. One synthetic scenario per failure (analysis/demo.hpp), a one-screen
// report, DIR/demo.json, and each pass's PNG plot (cli/plot_output.hpp; without
// matplotlib the plots are skipped with a note).
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "analysis/demo.hpp"
#include "api/analysis_json.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/option_checks.hpp"
#include "cli/plot_output.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"

namespace roundscope::cli {
namespace {

struct DemoArgs {
    std::string out = "roundscope-demo";
    bool no_plots = false, json = false;
    int threads = 0;
};

nlohmann::json scenario_json(const analysis::SyntheticSpec& s) {
    nlohmann::json j{{"scenario", analysis::scenario_name(s.scenario)},
                     {"heads", s.heads},
                     {"n", s.n},
                     {"d", s.d},
                     {"seed", s.seed}};
    if (s.scenario == analysis::Scenario::sink) j["k_sink"] = s.k_sink, j["sink_strength"] = s.sink_strength;
    if (s.scenario == analysis::Scenario::wide) j["spread"] = s.spread;
    if (s.d_model > 0) j["d_model"] = s.d_model;
    return j;
}

nlohmann::json report_json(const analysis::DemoReport& r) {
    nlohmann::json regimes = nlohmann::json::array();
    for (const auto& b : r.bias) {
        nlohmann::json j = api::bias_steps_json(b.steps);
        j["tie_gap"] = b.tie_gap;
        regimes.push_back(std::move(j));
    }
    nlohmann::json pcollapse = api::pcollapse_json(r.pcollapse, false), headroom = api::headroom_json(r.headroom, true);
    pcollapse["input"] = scenario_json(r.pcollapse_scenario);
    headroom["input"] = scenario_json(r.headroom_scenario);
    return {{"pcollapse", pcollapse},
            {"bias", {{"input", scenario_json(r.bias_scenario)}, {"recipe", r.bias_recipe}, {"regimes", regimes}}},
            {"leak",
             {{"input", scenario_json(r.leak_scenario)},
              {"recipe", r.leak_recipe},
              {"without_fix", api::leak_json(r.leak)},
              {"with_fix", api::leak_json(r.leak_fixed)}}},
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
        "\n2. BF16 rounding bias of delta = rowsum(dO * O) in {} (the paper's released code): two keys tie for the "
        "max, G above {} others, V and dO mostly negative; {} independent steps\n",
        r.bias_recipe, r.bias_scenario.n - 2, r.bias.empty() ? 0 : r.bias.front().steps.steps.size());
    fmt::print("   {:>3}  {:>21}  {:>15}  {:>20}  {:>20}  {:>20}\n", "G", "pair's share of P-bar", "rows > 1 - 2^-9",
               "sum of delta errors", "max adjustment", "delta from float32 O");
    for (const auto& b : r.bias) {
        const analysis::BiasSteps& s = b.steps;
        auto summed = [&](double sum, const analysis::StepSigns& g) {
            return fmt::format("{:+.2e} ({}/{} +)", sum, g.positive, s.steps.size());
        };
        fmt::print("   {:>3g}  {:>21.4f}  {:>14.0f}%  {:>20}  {:>20}  {:>20}  sign test p = {:.2g}\n", b.tie_gap,
                   b.tie_share, 100 * b.dominated_share, summed(s.cumulative_coefficient.back(), s.signs),
                   summed(b.max_adjust_sum, *s.max_adjust_signs),
                   summed(b.delta_from_f32_o_sum, *s.delta_from_f32_o_signs), s.signs.p_value);
    }
    fmt::print(
        "   (the tie decides the rounding of P-bar V where the pair holds more than 1 - 2^-9 of its row's P-bar)\n");
    fmt::print("\n3. Future leakage of {} V ({} tokens share a scale, causal, N = {})\n", r.leak.format, r.leak.block,
               r.leak.tokens);
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
            f.format, *f.emulated_naive_nonfinite_rows, f.ln_max, f.naive_exp_overflow_rows,
            *f.emulated_shifted_nonfinite_rows, *f.emulated_online_nonfinite_rows);
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
    cmd->add_option("--threads", a->threads, "Worker threads (0: all cores)")
        ->check(thread_count())
        ->capture_default_str();
    cmd->footer("Example: roundscope demo --out roundscope-demo\n");
    cmd->callback([a] { run(*a); });
}

}  // namespace roundscope::cli
