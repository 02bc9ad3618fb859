// `roundscope headroom (IN | --synthetic [--scenario S] [--n N] [--d D] [--seed S]) [--causal]
// [--json]`: softmax overflow margins per head and row, naive and online, in f32, f16 and
// bf16 (analysis/headroom.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/headroom.hpp"
#include "analysis/synthetic_attention.hpp"
#include "api/analyses.hpp"
#include "cli/analysis_flags.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/option_checks.hpp"
#include "cli/plot_output.hpp"
#include "lib/error.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::cli {
namespace {

struct HeadroomArgs {
    InputFlags input;
    AttentionFlags flags;
    std::string plot;

    HeadroomArgs() { input.spec.scenario = analysis::Scenario::wide; }
};

void print_report(const analysis::HeadroomResult& r) {
    std::vector<std::vector<std::string>> table;
    for (const auto& f : r.formats)
        table.push_back({f.format, fmt::format("{:.2f}", f.ln_max), std::to_string(f.naive_exp_overflow_rows),
                         std::to_string(f.naive_sum_overflow_rows), std::to_string(f.shifted_overflow_rows),
                         fmt::format("{:.3f}", f.min_naive_margin),
                         fmt::format("{} / {}", *f.emulated_naive_nonfinite_rows, *f.emulated_naive_zero_rows),
                         fmt::format("{} / {}", *f.emulated_shifted_nonfinite_rows, *f.emulated_shifted_zero_rows),
                         fmt::format("{} / {}", *f.emulated_online_nonfinite_rows, *f.emulated_online_zero_rows)});
    fmt::print("Softmax headroom over {} rows\n", r.rows.size());
    print_table({"format", "ln max", "exp overflows", "sum overflows", "shifted overflows", "min margin",
                 "naive NaN/Inf / zero rows", "shifted NaN/Inf / zero rows", "online NaN/Inf / zero rows"},
                table);
    std::vector<analysis::RowHeadroom> top = r.rows;
    std::sort(top.begin(), top.end(), [](const auto& x, const auto& y) { return x.lse > y.lse; });
    top.resize(std::min<std::size_t>(top.size(), 5));
    fmt::print("\nrows nearest overflow (by log-sum-exp):\n");
    std::vector<std::vector<std::string>> near;
    for (const auto& x : top)
        near.push_back({std::to_string(x.head), std::to_string(x.row), fmt::format("{:.3f}", x.max_score),
                        fmt::format("{:.3f}", x.lse)});
    print_table({"head", "row", "max score", "log-sum-exp"}, near);
}

void run(const HeadroomArgs& a) {
    check_plot(a.plot, {a.input.file});
    api::HeadroomRequest request;
    request.input = {a.input.source("headroom"), a.flags.problem(), a.flags.threads};
    const api::Answer answer = api::headroom(request);
    const auto& r = answer.result;
    output_analysis(
        "headroom", answer.json, a.flags.json, [&] { print_report(r); }, a.plot);
}

}  // namespace

void add_headroom_command(CLI::App& app) {
    auto* cmd = app.add_subcommand(
        "headroom", "Softmax overflow margins per row: naive (with and without max subtraction) and online");
    auto a = std::make_shared<HeadroomArgs>();
    a->input.add_to(cmd, "File with q, k, v");
    a->input.add_scenario(cmd);
    a->flags.add_to(cmd);
    add_plot_flag(cmd, a->plot);
    cmd->footer("Example: roundscope headroom --synthetic --scenario wide --n 256\n");
    cmd->callback([a] { run(*a); });
}

}  // namespace roundscope::cli
