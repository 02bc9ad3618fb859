// `roundscope attention IN --recipe NAME [--set KEY=VALUE]... [--backward] [--truth]
// [--causal|--no-causal] [--softmax-scale X] -o OUT [--json] [--threads N]`: the emulated
// flash attention of a recipe on a file's q, k, v (and do); with --truth, each output's error
// against the ground truth (analysis/attention_run.hpp).
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/attention_calls.hpp"
#include "cli/analysis_flags.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/recipe_flags.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "lib/memory_budget.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::cli {
namespace {

struct AttentionArgs {
    std::string input, output;
    AttentionFlags flags;
    RecipeFlags recipe;
    bool backward = false, truth = false;
};

void run(const AttentionArgs& a) {
    api::AttentionRequest request;
    request.recipe = a.recipe.choice();
    recipe_of(request.recipe);  // an unknown recipe before the output's path
    check_output("-o", a.output, {a.input});
    request.source = file_source(a.input), request.problem = a.flags.problem(), request.threads = a.flags.threads;
    request.backward = a.backward, request.truth = a.truth;
    const api::TensorAnswer answer = api::attention(request);
    write_output(a.output, answer.tensors, answer.metadata);
    const nlohmann::json& j = answer.json;
    if (a.flags.json) {
        nlohmann::json out = j;
        out["output"] = a.output;
        print_json(out);
        return;
    }
    const bool causal = j.at("causal").get<bool>();
    fmt::print("{}: recipe {}, {} head(s), Nq {}, Nk {}, D {}, {}causal -> {}\n", a.input,
               j.at("recipe").get<std::string>(), j.at("heads").get<std::uint64_t>(), j.at("n_q").get<std::uint64_t>(),
               j.at("n_kv").get<std::uint64_t>(), j.at("d").get<std::uint64_t>(), causal ? "" : "not ", a.output);
    if (a.truth) {
        std::vector<std::vector<std::string>> rows;
        for (const auto& [name, s] : j.at("errors").items())
            rows.push_back({name, fmt::format("{:.3e}", json_number_value(s.at("max_abs"), name)),
                            fmt::format("{:.3e}", json_number_value(s.at("rms"), name)),
                            fmt::format("{:.3e}", json_number_value(s.at("rel_rms"), name))});
        print_table({"output", "max |error|", "rms error", "relative rms"}, rows);
    }
}

}  // namespace

void add_attention_command(CLI::App& app) {
    auto* cmd =
        app.add_subcommand("attention", "Emulated flash attention of a recipe, bit for bit as its kernel computes it");
    auto a = std::make_shared<AttentionArgs>();
    cmd->add_option("IN", a->input, "File with q, k, v (and do)")->required();
    cmd->add_option("-o,--output", a->output, "Output .safetensors: o, lse (dq, dk, dv, delta with --backward)")
        ->required();
    a->recipe.add_to(cmd);
    cmd->add_flag("--backward", a->backward, "Also the backward pass (needs do)");
    cmd->add_flag("--truth", a->truth, "Errors of every output against the ground truth");
    a->flags.add_to(cmd, "--softmax-scale,--scale");
    cmd->footer(
        "Example: roundscope attention dump.safetensors --recipe fa3-fp8 --backward --truth -o out.safetensors\n");
    cmd->callback([a] { run(*a); });
}

}  // namespace roundscope::cli
