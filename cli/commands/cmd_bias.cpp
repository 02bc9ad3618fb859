// `roundscope bias (IN... | --synthetic [--n N] [--d D] [--heads H] [--seed S] [--steps K]
// [--d-model M]) [--recipe NAME] [--set KEY=VALUE]... [--fix] [--causal] [--json] [--plot PNG]`:
// the rounding bias of delta = rowsum(dO * O) in flash-attention backward
// (analysis/rounding_bias.hpp), and with x (and wq) in the inputs the error it makes in dW^Q
// (analysis/query_weight_error.hpp). Several inputs are training steps: their coefficients and
// their dW^Q errors accumulate.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/bias_steps.hpp"
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

struct BiasArgs {
    std::vector<std::string> files;
    InputFlags input;
    AttentionFlags flags;
    RecipeFlags recipe{"fa2-bf16"};
    std::string plot;
    bool fix = false;
    std::uint64_t steps = 1;

    BiasArgs() {
        input.spec.scenario = analysis::Scenario::repeated_max;
        input.spec.n = 512, input.spec.heads = 2;
    }
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
        "{}: recipe {}, {} rows: coefficient sum {:+.4e}, {} rows positive; P-bar = 1 (after its cast) {} times\n",
        label, b.recipe, b.rows, b.coefficient_sum, b.positive_rows, b.p_bar_one_count);
    if (b.tied_rows > 0)
        fmt::print(
            "  ties: {} rows end with two or more keys at P-bar = 1, holding {:.5f} of their row's P-bar mass on "
            "average; {} of them hold more than 1 - 2^-9 (where the tie decides the rounding of P-bar V)\n",
            b.tied_rows, b.tie_share_mean, b.tie_dominated_rows);
    if (b.one_key_rows > 0)
        fmt::print("  {} rows have one key at P-bar = 1 holding more than 1 - 2^-9 of their row (l rounds to 1)\n",
                   b.one_key_rows);
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
    auto signs = [](const char* what, const analysis::StepSigns& g) {
        fmt::print("{}: {} steps positive, {} negative (sign test p = {:.3g})\n", what, g.positive, g.negative,
                   g.p_value);
    };
    signs("signs across steps", s.signs);
    if (s.max_adjust_signs) signs("  with the max adjustment", *s.max_adjust_signs);
    if (s.delta_from_f32_o_signs) signs("  with delta from float32 O", *s.delta_from_f32_o_signs);
    if (!s.query_weight.empty())
        fmt::print(
            "dW^Q error summed over the steps: |sum E| = {:.4e}, {:.3f} of sum |E| (1: every step the same way)\n",
            s.query_weight.cumulative_norm().back(), s.query_weight.coherence());
}

void run(const BiasArgs& a) {
    if (a.input.synthetic == !a.files.empty()) throw Error("bias: give input files or --synthetic, not both");
    check_plot(a.plot, {a.files.empty() ? "" : a.files.front()});
    api::BiasRequest request;
    request.input.source.synthetic = a.input.synthetic, request.input.source.spec = a.input.spec;
    request.input.problem = a.flags.problem(), request.input.threads = a.flags.threads;
    for (const std::string& path : a.files) request.files.push_back(file_source(path));
    request.steps = a.steps, request.recipe = a.recipe.choice(), request.fix = a.fix;
    const api::Answer answer = api::bias(request);
    const auto& s = answer.result;
    output_analysis(
        "bias", answer.json, a.flags.json, [&] { print(s); }, a.plot);
}

}  // namespace

void add_bias_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("bias", "Rounding bias of delta = rowsum(dO * O) in flash-attention backward");
    auto a = std::make_shared<BiasArgs>();
    cmd->add_option("IN", a->files, "Files with q, k, v, do (and o), one per training step");
    a->input.add_synthetic(cmd);
    a->input.add_heads(cmd);
    a->recipe.add_to(cmd);
    cmd->add_flag("--fix", a->fix, "Also under the max adjustment and with delta from float32 O");
    a->input.synthetic_only(cmd->add_option("--steps", a->steps, "Synthetic steps (seeds seed, seed + 1, ...)"))
        ->check(integer_in(api::ranges::steps))
        ->capture_default_str();
    a->input
        .synthetic_only(cmd->add_option("--tie-gap", a->input.spec.tie_gap,
                                        "G: how far the tied pair scores above the rest (synthetic; the bias "
                                        "acts from about 12)"))
        ->check(finite_in(api::ranges::tie_gap))
        ->capture_default_str();
    a->input
        .synthetic_only(
            cmd->add_option("--tied-keys", a->input.spec.tied_keys,
                            "How many identical keys lead by G (synthetic; 1: a single dominant key, no tie)"))
        ->check(integer_in(api::ranges::tied_keys))
        ->capture_default_str();
    a->input
        .synthetic_only(
            cmd->add_option("--d-model", a->input.spec.d_model,
                            "Synthetic layer input x [N, M] and query weight (q = x W^Q): M >= 2, 0 for none"))
        ->check(integer_in(api::ranges::d_model))
        ->capture_default_str();
    a->flags.add_to(cmd);
    add_plot_flag(cmd, a->plot);
    cmd->footer("Example: roundscope bias --synthetic --steps 8 --d-model 256 --fix\n");
    cmd->callback([a] { run(*a); });
}

}  // namespace roundscope::cli
