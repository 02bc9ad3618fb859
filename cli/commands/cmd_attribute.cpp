// `roundscope attribute (IN | --synthetic [--scenario S] [--n N] [--d D] [--seed S]) --recipe
// NAME [--set KEY=VALUE]... [--causal] [--json]`: which stage of a recipe its output error
// comes from (analysis/attribute.hpp).
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/attribute.hpp"
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

struct AttributeArgs {
    InputFlags input;
    AttentionFlags flags;
    std::string plot;
    RecipeFlags recipe;
};

std::string error_text(const std::optional<double>& x) { return x ? fmt::format("{:.3e}", *x) : "n/a"; }

void print_report(const analysis::AttributeResult& r) {
    fmt::print("Error attribution for {}: relative rms error of O against the truth of the inputs as held\n", r.recipe);
    fmt::print("recipe as is: {:.3e}; every stage exact: {:.3e}\n", r.all_low, r.all_exact);
    std::vector<std::vector<std::string>> rows;
    for (const auto& s : r.stages)
        rows.push_back({s.stage, error_text(s.only_this_low), error_text(s.only_this_exact)});
    print_table({"stage", "only this stage low", "only this stage exact"}, rows);
    if (r.delta_recipe)
        fmt::print("delta: as the recipe forms it {:.3e}, from its O before the final cast {:.3e}\n", *r.delta_recipe,
                   *r.delta_from_f32_o);
}

void run(const AttributeArgs& a) {
    check_plot(a.plot, {a.input.file});
    api::AttributeRequest request;
    request.input = {a.input.source("attribute"), a.flags.problem(), a.flags.threads};
    request.recipe = a.recipe.choice();
    const api::Answer answer = api::attribute(request);
    const auto& r = answer.result;
    output_analysis(
        "attribute", answer.json, a.flags.json, [&] { print_report(r); }, a.plot);
}

}  // namespace

void add_attribute_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("attribute", "Which stage of a recipe the output error comes from");
    auto a = std::make_shared<AttributeArgs>();
    a->input.add_to(cmd, "File with q, k, v (and do)");
    a->input.add_scenario(cmd);
    a->recipe.add_to(cmd);
    a->flags.add_to(cmd);
    add_plot_flag(cmd, a->plot);
    cmd->footer("Example: roundscope attribute --synthetic --recipe fa3-fp8 --n 256\n");
    cmd->callback([a] { run(*a); });
}

}  // namespace roundscope::cli
