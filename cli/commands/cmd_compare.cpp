// `roundscope compare FILE --recipe NAME [--set KEY=VALUE]... [--causal|--no-causal]
// [--softmax-scale X] [--json] [--threads N]`: what a real kernel wrote into a dump (o; lse, dq,
// dk, dv when present) against the exact truth and against the recipe's emulation of the same
// inputs (analysis/kernel_compare.hpp).
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/kernel_compare.hpp"
#include "cli/analysis_flags.hpp"
#include "cli/analysis_json.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/recipe_flags.hpp"
#include "lib/memory_budget.hpp"

namespace roundscope::cli {
namespace {

struct CompareArgs {
    std::string input;
    AttentionFlags flags;
    RecipeFlags recipe;
};

std::string histogram_text(const analysis::UlpHistogram& h) {
    std::string s;
    for (const auto& [label, count] : h.buckets) s += (s.empty() ? "" : ", ") + label + ": " + std::to_string(count);
    return s;
}

void compare(const CompareArgs& a) {
    const emu::AttentionRecipe recipe = a.recipe.recipe();
    const TensorFile file = read_input(a.input);
    const ChosenInputs c = naming_input(a.input, [&] { return file_inputs(file, a.flags); });
    check_memory(attention_bytes(c.in, c.in.d_o.has_value(), true, a.flags.threads), a.input);
    analysis::AttentionRunOptions o;
    o.causal = c.causal, o.scale = c.softmax_scale, o.threads = a.flags.threads;
    const analysis::KernelComparison r =
        naming_input(a.input, [&] { return analysis::compare_kernel(file, c.in, recipe, o); });
    if (a.flags.json) {
        nlohmann::json j = compare_json(r);
        j["file"] = a.input;
        j["recipe"] = recipe.name;
        j["causal"] = c.causal;
        j["softmax_scale"] = json_number(static_cast<double>(r.shape.scale));
        print_json(j);
        return;
    }
    fmt::print("{}: the kernel's outputs against the truth and recipe {} ({} head(s), Nq {}, Nk {}, D {}, {}causal)\n",
               a.input, recipe.name, r.shape.heads, r.shape.n_q, r.shape.n_kv, r.shape.d, c.causal ? "" : "not ");
    std::vector<std::vector<std::string>> rows;
    for (const analysis::OutputComparison& x : r.outputs)
        rows.push_back({x.name, std::string(name(x.dtype)), fmt::format("{:.3e}", x.truth_error.max_abs),
                        fmt::format("{:.3e}", x.truth_error.rel_rms), fmt::format("{}/{}", x.matched, x.total),
                        std::to_string(x.max_ulp)});
    print_table({"output", "dtype", "max |error|", "relative rms", "bits equal to the recipe", "max ulp"}, rows);
    for (const analysis::OutputComparison& x : r.outputs) {
        fmt::print("{}: ulps from the correctly rounded truth: {}\n", x.name, histogram_text(x.ulp_histogram));
        if (!x.worst.empty()) {
            const analysis::WorstElement& w = x.worst.front();
            fmt::print("{}: worst at {}: kernel {} truth {} recipe {}\n", x.name, shape_string(w.index),
                       format_double(w.kernel), format_double(w.truth), format_double(w.emulated));
        }
    }
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
    a->flags.add_to(cmd, "--softmax-scale,--scale");
    cmd->footer("Example: roundscope compare dump.safetensors --recipe fa2-bf16 --json\n");
    cmd->callback([a] { compare(*a); });
}

}  // namespace roundscope::cli
