// `roundscope compare FILE --recipe NAME [--set KEY=VALUE]... [--outputs o,lse,...]
// [--rtol R --atol A] [--causal|--no-causal] [--softmax-scale X] [--json] [--threads N]`: what a real kernel wrote into
// a dump (o; lse, dq, dk, dv when present) against the exact truth and against the recipe's emulation of the same
// inputs (analysis/kernel_compare.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/kernel_compare.hpp"
#include "api/analysis_json.hpp"
#include "api/attention_calls.hpp"
#include "cli/analysis_flags.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/option_checks.hpp"
#include "cli/recipe_flags.hpp"
#include "lib/memory_budget.hpp"

namespace roundscope::cli {
namespace {

struct CompareArgs {
    std::string input, outputs;
    AttentionFlags flags;
    RecipeFlags recipe;
    std::optional<double> rtol, atol;
};

std::string histogram_text(const analysis::UlpHistogram& h) {
    std::string s;
    for (const auto& [label, count] : h.buckets) s += (s.empty() ? "" : ", ") + label + ": " + std::to_string(count);
    return s;
}

/// The outputs' lines beyond the table: the ulp histogram, the worst element, and what a kernel's
/// CI asks first (NaN where the truth is finite, sign flips near zero, the tolerance's failures).
void print_output_details(const analysis::OutputComparison& x) {
    fmt::print("{}: ulps from the correctly rounded truth: {}\n", x.name, histogram_text(x.ulp_histogram));
    if (!x.worst.empty()) {
        const analysis::WorstElement& w = x.worst.front();
        fmt::print("{}: worst at {}: kernel {} truth {} recipe {}\n", x.name, shape_string(w.index),
                   format_double(w.kernel), format_double(w.truth), format_double(w.emulated));
    }
    // Always one line, so that an output's report has the same lines whatever its counts.
    std::string ci = fmt::format("{}: {} NaN or Inf where the truth is finite", x.name, x.nonfinite);
    if (x.first_nonfinite) ci += fmt::format(" (the first at {})", shape_string(x.first_nonfinite->index));
    ci += fmt::format(", {} sign flip(s) near zero (below one ulp of the row's largest value)", x.sign_flips_near_zero);
    if (x.outside_tolerance) ci += fmt::format(", {} outside the tolerance", *x.outside_tolerance);
    fmt::print("{}\n", ci);
}

void compare(const CompareArgs& a) {
    api::CompareRequest request;
    request.source = file_source(a.input), request.problem = a.flags.problem(), request.threads = a.flags.threads;
    request.recipe = a.recipe.choice();
    if (!a.outputs.empty()) request.outputs = a.outputs;
    request.rtol = a.rtol, request.atol = a.atol;
    const api::Answer answer = api::compare(request);
    if (a.flags.json) {
        print_json(answer.json);
        return;
    }
    const analysis::KernelComparison& r = answer.result;
    const emu::AttentionRecipe recipe = a.recipe.recipe();
    const bool causal = answer.json.at("causal").get<bool>();
    fmt::print("{}: the kernel's outputs against the truth and recipe {} ({} head(s), Nq {}, Nk {}, D {}, {}causal)\n",
               a.input, recipe.name, r.shape.heads, r.shape.n_q, r.shape.n_kv, r.shape.d, causal ? "" : "not ");
    std::vector<std::vector<std::string>> rows;
    for (const analysis::OutputComparison& x : r.outputs)
        rows.push_back({x.name, std::string(name(x.dtype)), fmt::format("{:.3e}", x.truth_error.max_abs),
                        fmt::format("{:.3e}", x.truth_error.rel_rms), fmt::format("{}/{}", x.matched, x.total),
                        x.max_ulp == ~std::uint64_t{0} ? "NaN" : std::to_string(x.max_ulp),
                        fmt::format("{:.3g}", x.max_row_ulp)});
    print_table({"output", "dtype", "max |error|", "relative rms", "bits equal to the recipe", "max ulp",
                 "max ulp of row scale"},
                rows);
    for (const analysis::OutputComparison& x : r.outputs) print_output_details(x);
    for (const auto& note : answer.json.at("notes")) fmt::print("{}\n", note.get<std::string>());
    fmt::print("{} of {} output bit patterns equal the recipe's\n", r.matched, r.total);
}

}  // namespace

void add_compare_command(CLI::App& app) {
    auto* cmd = app.add_subcommand(
        "compare", "A kernel's outputs in a dump against the exact truth and a recipe's emulation, bit for bit");
    auto a = std::make_shared<CompareArgs>();
    cmd->add_option("FILE", a->input, "Dump with q, k, v and what the kernel wrote: o (lse, and dq, dk, dv with do)")
        ->required();
    a->recipe.add_to(cmd);
    cmd->add_option("--outputs", a->outputs,
                    "Compare only these outputs, comma-separated (o,lse: a forward-only recipe against a dump "
                    "that also holds gradients); default: all the dump holds")
        ->check(accepted_by([](const std::string& s) { analysis::parse_output_names(s, ""); }, "o,lse,dq,dk,dv"));
    auto* rtol = cmd->add_option("--rtol", a->rtol,
                                 "Count the elements outside |kernel - recipe| <= atol + rtol |recipe| (with --atol)")
                     ->check(finite_in(0, std::numeric_limits<double>::max()));
    auto* atol = cmd->add_option("--atol", a->atol, "The absolute tolerance beside --rtol")
                     ->check(finite_in(0, std::numeric_limits<double>::max()));
    rtol->needs(atol);
    atol->needs(rtol);
    a->flags.add_to(cmd, "--softmax-scale,--scale");
    cmd->footer("Example: roundscope compare dump.safetensors --recipe fa2-bf16 --json\n");
    cmd->callback([a] { compare(*a); });
}

}  // namespace roundscope::cli
