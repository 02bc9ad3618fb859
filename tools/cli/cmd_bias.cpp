// `roundscope bias (IN... | --synthetic [--n N] [--d D] [--heads H] [--seed S] [--steps K]
// [--d-model M]) [--recipe NAME] [--set KEY=VALUE]... [--fix] [--causal] [--json] [--plot PNG]`:
// the rounding bias of delta = rowsum(dO * O) in flash-attention backward
// (analysis/rounding_bias.hpp), and with x (and wq) in the inputs the error it makes in dW^Q
// (analysis/query_weight_error.hpp). Several inputs are training steps: their coefficients and
// their dW^Q errors accumulate.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/bias_steps.hpp"
#include "analysis/synthetic_attention.hpp"
#include "lib/error.hpp"
#include "lib/tensor_io.hpp"
#include "tools/cli/analysis_flags.hpp"
#include "tools/cli/analysis_json.hpp"
#include "tools/cli/cli_output.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/plot_output.hpp"
#include "tools/cli/recipe_flags.hpp"

namespace roundscope::cli {
namespace {

struct BiasArgs {
    std::vector<std::string> inputs;
    RecipeFlags recipe{"fa2-bf16"};
    std::string plot;
    bool synthetic = false, fix = false, causal = false, json = false;
    std::uint64_t n = 512, d = 64, heads = 2, seed = 0, steps = 1, d_model = 0;
    int threads = 0;
};

void print(const analysis::QueryWeightError& q) {
    fmt::print(
        "query weight (q = x W^Q, M = {}): the delta error's part of dW^Q, E = scale sum_T c[T] x[T]^T (PK)[T]\n",
        q.d_model);
    std::vector<std::vector<std::string>> rows;
    auto optional = [](const std::optional<double>& x, const char* f) {
        return x ? fmt::format(fmt::runtime(f), *x) : std::string("-");
    };
    for (const auto& h : q.per_head)
        rows.push_back({std::to_string(h.head), fmt::format("{:+.4e}", h.coefficient_sum),
                        fmt::format("{:.4f}", h.rank1_mean_cosine), fmt::format("{:+.4f}", h.error_structure_cosine),
                        fmt::format("{:.4e}", h.dwq_error_norm), fmt::format("{:.3e}", h.dwq_error_norm / h.dwq_norm),
                        optional(h.wq_norm, "{:.4e}"), optional(h.q_projection_residual, "{:.1e}")});
    print_table(
        {"head", "sum c[T]", "cos(R_T, R_T')", "cos(E, R)", "|E|", "|E| / |dW^Q|", "|W^Q|", "|q - x W^Q| / |q|"}, rows);
}

void print(const analysis::BiasResult& b, const std::string& label) {
    fmt::print(
        "{}: recipe {}, {} rows: coefficient sum {:+.4e}, {} rows positive, t = {:.2f}; P-bar = 1 {} times, {} rows "
        "with a "
        "repeated max\n",
        label, b.recipe, b.rows, b.coefficient_sum, b.positive_rows, b.t_statistic, b.p_bar_one_count,
        b.repeated_max_rows);
    std::vector<std::vector<std::string>> rows;
    for (const auto& d : b.top_dims)
        rows.push_back({std::to_string(d.dim), fmt::format("{:+.4e}", d.contribution),
                        fmt::format("{:.2f}", d.o_error_negative_fraction),
                        fmt::format("{:.2f}", d.v_negative_fraction)});
    print_table({"dim", "sum dO (O_lp - O_hp)", "O error < 0", "V < 0"}, rows);
    if (b.query_weight) print(*b.query_weight);
}

void print(const analysis::BiasSteps& s) {
    for (const analysis::BiasStep& step : s.steps) {
        print(step.result, step.label);
        if (step.fixes) {
            print(step.fixes->max_adjust, "  fix: max adjustment");
            print(step.fixes->delta_from_f32_o, "  fix: delta from float32 O");
        }
    }
    if (s.steps.size() < 2) return;
    fmt::print("cumulative coefficient over {} steps: {:+.4e}\n", s.steps.size(), s.cumulative_coefficient.back());
    if (!s.query_weight.empty())
        fmt::print(
            "dW^Q error summed over the steps: |sum E| = {:.4e}, {:.3f} of sum |E| (1: every step the same way)\n",
            s.query_weight.cumulative_norm().back(), s.query_weight.coherence());
}

void run(const BiasArgs& a) {
    if (a.synthetic == !a.inputs.empty()) throw Error("bias: give input files or --synthetic, not both");
    analysis::BiasOptions o;
    o.recipe = a.recipe.recipe();
    o.causal = a.causal, o.threads = a.threads;
    std::size_t count = a.inputs.size();
    analysis::BiasStepSource source = [&a](std::size_t i) {
        const std::string& path = a.inputs[i];
        return analysis::BiasStepInput{path, path, emu::find_attention_inputs(read_tensor_file(path))};
    };
    if (a.synthetic) {
        analysis::SyntheticSpec spec;
        spec.scenario = analysis::Scenario::repeated_max;
        spec.n = a.n, spec.d = a.d, spec.heads = a.heads, spec.seed = a.seed, spec.d_model = a.d_model;
        count = a.steps, source = analysis::synthetic_bias_steps(spec);
    }
    const analysis::BiasSteps s = analysis::bias_over_steps(count, source, o, a.fix);
    const nlohmann::json out = bias_steps_json(s);
    if (a.json)
        fmt::print("{}\n", out.dump());
    else
        print(s);
    if (!a.plot.empty()) draw_plot("bias", out, a.plot);
}

}  // namespace

void add_bias_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("bias", "Rounding bias of delta = rowsum(dO * O) in flash-attention backward");
    auto a = std::make_shared<BiasArgs>();
    cmd->add_option("IN", a->inputs, "Files with q, k, v, do (and o), one per training step");
    add_synthetic_flags(cmd, a->synthetic, a->n, a->d, a->seed);
    a->recipe.add_to(cmd);
    cmd->add_flag("--fix", a->fix, "Also under the max adjustment and with delta from float32 O");
    cmd->add_flag("--causal", a->causal, "Causal mask");
    cmd->add_option("--heads", a->heads, "Heads (synthetic)")->check(CLI::PositiveNumber);
    cmd->add_option("--steps", a->steps, "Synthetic steps (seeds seed, seed + 1, ...)")->check(CLI::PositiveNumber);
    cmd->add_option("--d-model", a->d_model,
                    "Synthetic layer input x [N, M] and query weight (q = x W^Q): M >= 2 (default 0: none)")
        ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 16));
    add_output_flags(cmd, a->json, a->threads);
    add_plot_flag(cmd, a->plot);
    cmd->callback([a] { run(*a); });
}

}  // namespace roundscope::cli
