// `roundscope attention IN --recipe NAME [--set KEY=VALUE]... [--backward] [--truth]
// [--causal|--no-causal] [--softmax-scale X] -o OUT [--json] [--threads N]`: the emulated
// flash attention of a recipe on a file's q, k, v (and do); with --truth, each output's error
// against the ground truth (analysis/attention_run.hpp).
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/attention_run.hpp"
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

template <class Bits>
Tensor tensor_of(const std::string& name, const emu::Format& f, Shape shape, const std::vector<Bits>& x) {
    return Tensor::of_bits(name, emu::dtype_of(f), std::move(shape), x);
}

nlohmann::json stats_json(const analysis::ErrorStats& s) {
    return {{"max_abs", json_number(s.max_abs)}, {"rms", json_number(s.rms)}, {"rel_rms", json_number(s.rel_rms)}};
}

void run(const AttentionArgs& a) {
    const emu::AttentionRecipe recipe = a.recipe.recipe();
    check_output("-o", a.output, {a.input});
    const ChosenInputs c = file_inputs(a.input, a.flags);
    const emu::AttentionInputs& in = c.in;
    check_memory(attention_bytes(in, a.backward, a.truth, a.flags.threads), a.input);
    analysis::AttentionRunOptions o;
    o.causal = c.causal, o.scale = c.softmax_scale;
    o.backward = a.backward, o.truth = a.truth, o.threads = a.flags.threads;
    const analysis::AttentionRun r = naming_input(a.input, [&] { return analysis::run_attention(in, recipe, o); });

    std::vector<Tensor> out;
    out.push_back(tensor_of("o", *recipe.o_format, output_shape(in, {in.n_q, in.d_v}), r.forward.o));
    out.push_back(tensor_of("lse", emu::f32, output_shape(in, {in.n_q}), r.forward.lse));
    if (r.backward) {
        out.push_back(tensor_of("dq", *recipe.grad_format, output_shape(in, {in.n_q, in.d}), r.backward->dq));
        out.push_back(tensor_of("dk", *recipe.grad_format, kv_output_shape(in, {in.n_kv, in.d}), r.backward->dk));
        out.push_back(tensor_of("dv", *recipe.grad_format, kv_output_shape(in, {in.n_kv, in.d_v}), r.backward->dv));
        out.push_back(tensor_of("delta", emu::f32, output_shape(in, {in.n_q}), r.backward->delta));
    }
    const nlohmann::json settings(emu::recipe_settings(recipe));
    write_output(a.output, out,
                 {{"source", a.input},
                  {"recipe", recipe.name},
                  {"recipe_settings", settings.dump()},
                  {"causal", o.causal ? "true" : "false"},
                  {"softmax_scale", format_double(static_cast<double>(r.shape.scale))}});
    if (a.flags.json) {
        nlohmann::json j{{"file", a.input},
                         {"output", a.output},
                         {"recipe", recipe.name},
                         {"settings", settings},
                         {"heads", r.shape.heads},
                         {"n_q", r.shape.n_q},
                         {"n_kv", r.shape.n_kv},
                         {"causal", o.causal},
                         {"softmax_scale", json_number(static_cast<double>(r.shape.scale))}};
        if (a.truth) {
            nlohmann::json errors = nlohmann::json::object();
            for (const auto& [name, s] : r.errors) errors[name] = stats_json(s);
            j["errors"] = errors;
        }
        print_json(j);
        return;
    }
    fmt::print("{}: recipe {}, {} head(s), Nq {}, Nk {}, D {}, {}causal -> {}\n", a.input, recipe.name, r.shape.heads,
               r.shape.n_q, r.shape.n_kv, r.shape.d, o.causal ? "" : "not ", a.output);
    if (a.truth) {
        std::vector<std::vector<std::string>> rows;
        for (const auto& [name, s] : r.errors)
            rows.push_back({name, fmt::format("{:.3e}", s.max_abs), fmt::format("{:.3e}", s.rms),
                            fmt::format("{:.3e}", s.rel_rms)});
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
