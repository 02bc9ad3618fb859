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

Tensor f64_tensor(const std::string& name, Shape shape, const std::vector<double>& x) {
    return Tensor::of_bits(name, DType::f64, std::move(shape), x);
}

void run_truth(const TruthArgs& a) {
    check_output("-o", a.output, {a.input});
    const ChosenInputs c = file_inputs(a.input, a.flags);
    const emu::AttentionInputs& in = c.in;
    if (a.backward && !in.d_o) throw Error(fmt::format("{}: --backward needs a tensor 'do'", a.input));
    double bytes = attention_bytes(in, a.backward, true, a.flags.threads);
    if (a.intermediates) bytes += 2 * 8 * static_cast<double>(in.batch * in.heads * in.n_q * in.n_kv);
    check_memory(bytes, a.input);
    analysis::TruthOptions o;
    o.causal = c.causal, o.scale = c.softmax_scale;
    o.backward = a.backward;
    o.intermediates = a.intermediates;
    o.precision = a.bits;
    o.threads = a.flags.threads;
    const analysis::AttentionTruth t = naming_input(a.input, [&] {
        return a.reference ? analysis::attention_truth_reference(in, o) : analysis::attention_truth(in, o);
    });

    std::vector<Tensor> out;
    out.push_back(f64_tensor("o", output_shape(in, {in.n_q, in.d_v}), t.o));
    out.push_back(f64_tensor("lse", output_shape(in, {in.n_q}), t.lse));
    if (a.backward) {
        out.push_back(f64_tensor("delta", output_shape(in, {in.n_q}), t.delta));
        out.push_back(f64_tensor("dq", output_shape(in, {in.n_q, in.d}), t.dq));
        out.push_back(f64_tensor("dk", kv_output_shape(in, {in.n_kv, in.d}), t.dk));
        out.push_back(f64_tensor("dv", kv_output_shape(in, {in.n_kv, in.d_v}), t.dv));
    }
    if (a.intermediates) {
        out.push_back(f64_tensor("s", output_shape(in, {in.n_q, in.n_kv}), t.s));
        out.push_back(f64_tensor("p", output_shape(in, {in.n_q, in.n_kv}), t.p));
    }
    write_output(
        a.output, out,
        {{"source", a.input},
         {"causal", o.causal ? "true" : "false"},
         {"bias",
          in.mask.dense.empty() ? "none" : "from the input's tensor '" + in.mask.dense[0].tensor().name() + "'"},
         {"mask", in.mask.describe(o.causal)},
         {"softcap", format_double(in.softcap)},
         {"softmax_scale", format_double(t.scale)},
         {"truth", "every value the float64 nearest the exact result"},
         {"precision_bits", std::to_string(t.max_precision_used)}});
    if (a.flags.json) {
        nlohmann::json names = nlohmann::json::array();
        for (const Tensor& x : out) names.push_back(x.name());
        print_json(nlohmann::json{{"file", a.input},
                                  {"output", a.output},
                                  {"heads", t.heads},
                                  {"n_q", t.n_q},
                                  {"n_kv", t.n_kv},
                                  {"causal", o.causal},
                                  {"bias", !in.mask.dense.empty()},
                                  {"mask", in.mask.describe(o.causal)},
                                  {"kv_heads", t.kv_heads},
                                  {"softcap", json_number(in.softcap)},
                                  {"softmax_scale", json_number(t.scale)},
                                  {"precision_bits", t.max_precision_used},
                                  {"fast_heads", t.fast_heads},
                                  {"tensors", names}});
    } else {
        fmt::print("{}: {} head(s), Nq {}, Nk {}, D {}, Dv {}, {}causal, scale {}; {} head(s) by the fast path -> {}\n",
                   a.input, t.heads, t.n_q, t.n_kv, t.d, t.d_v, o.causal ? "" : "not ", format_double(t.scale),
                   t.fast_heads, a.output);
    }
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
        ->check(integer_in(16, 1 << 14))
        ->capture_default_str();
    cmd->add_flag("--backward", a->backward, "Also dq, dk, dv and delta (needs do)");
    cmd->add_flag("--intermediates", a->intermediates, "Also s and p");
    cmd->add_flag("--reference", a->reference, "Use the MPFI reference path for everything (slow; the same bits)");
    a->flags.add_to(cmd, "--softmax-scale,--scale");
    cmd->footer("Example: roundscope truth dump.safetensors --backward -o truth.safetensors\n");
    cmd->callback([a] { run_truth(*a); });
}

}  // namespace roundscope::cli
