// `roundscope truth IN [--bits 256] [--backward] [--causal|--no-causal] [--softmax-scale S]
// [--intermediates] -o OUT [--json] [--threads N]`: the ground truth of attention on q, k, v
// (and do, and an additive bias where the file has one), every output the float64 nearest the
// exact result (analysis/truth).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/truth/attention_truth.hpp"
#include "api/attention_calls.hpp"
#include "cli/analysis_flags.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/option_checks.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "lib/memory_budget.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::cli {
namespace {

struct TruthArgs {
    std::string input, output;
    AttentionFlags flags;
    int bits = 256;
    bool backward = false, intermediates = false, reference = false;
};

void run_truth(const TruthArgs& a) {
    check_output("-o", a.output, {a.input});
    api::TruthRequest request;
    request.source = file_source(a.input), request.problem = a.flags.problem(), request.threads = a.flags.threads;
    request.bits = a.bits, request.backward = a.backward, request.intermediates = a.intermediates;
    request.reference = a.reference;
    const api::TensorAnswer answer = api::truth(request);
    write_output(a.output, answer.tensors, answer.metadata);
    const nlohmann::json& j = answer.json;
    if (a.flags.json) {
        nlohmann::json out = j;
        out["output"] = a.output;
        print_json(out);
        return;
    }
    fmt::print("{}: {} head(s), Nq {}, Nk {}, D {}, Dv {}, {}causal, scale {}; {} head(s) by the fast path -> {}\n",
               a.input, j.at("heads").get<std::uint64_t>(), j.at("n_q").get<std::uint64_t>(),
               j.at("n_kv").get<std::uint64_t>(), j.at("d").get<std::uint64_t>(), j.at("d_v").get<std::uint64_t>(),
               j.at("causal").get<bool>() ? "" : "not ",
               format_double(json_number_value(j.at("softmax_scale"), "scale")),
               j.at("fast_heads").get<std::uint64_t>(), a.output);
}

}  // namespace

void add_truth_command(CLI::App& app) {
    auto* cmd =
        app.add_subcommand("truth", "Exact attention (forward, and backward with --backward), rounded once to float64");
    auto a = std::make_shared<TruthArgs>();
    cmd->add_option("IN", a->input,
                    "File with q, k, v (and do; an additive score bias 'bias' [.., Nq, Nk], -inf masking)")
        ->required();
    cmd->add_option("-o,--output", a->output, "Output .safetensors (F64 tensors)")->required();
    cmd->add_option("--bits", a->bits, "Precision of the first attempt (doubled until every output is decided)")
        ->check(integer_in(api::ranges::truth_bits))
        ->capture_default_str();
    cmd->add_flag("--backward", a->backward, "Also dq, dk, dv and delta (needs do)");
    cmd->add_flag("--intermediates", a->intermediates, "Also s and p");
    cmd->add_flag("--reference", a->reference, "Use the MPFI reference path for everything (slow; the same bits)");
    a->flags.add_to(cmd, "--softmax-scale,--scale");
    cmd->footer("Example: roundscope truth dump.safetensors --backward -o truth.safetensors\n");
    cmd->callback([a] { run_truth(*a); });
}

}  // namespace roundscope::cli
