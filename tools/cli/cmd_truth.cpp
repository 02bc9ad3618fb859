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
#include "emu/attention/attention_inputs.hpp"
#include "lib/error.hpp"
#include "lib/tensor_io.hpp"
#include "tools/cli/analysis_flags.hpp"
#include "tools/cli/cli_output.hpp"
#include "tools/cli/commands.hpp"

namespace roundscope::cli {
namespace {

struct TruthArgs {
    std::string input, output;
    int bits = 256;
    bool backward = false, intermediates = false, json = false, reference = false;
    bool causal = false, no_causal = false;
    double scale = 0;
    int threads = 0;
};

Tensor f64_tensor(const std::string& name, Shape shape, const std::vector<double>& x) {
    return Tensor::of_bits(name, DType::f64, std::move(shape), x);
}

void run_truth(const TruthArgs& a) {
    if (a.output.empty()) throw Error("truth: -o OUT is required");
    const TensorFile file = read_tensor_file(a.input);
    const emu::AttentionInputs in = emu::find_attention_inputs(file);
    analysis::TruthOptions o;
    o.causal = a.causal ? true : a.no_causal ? false : in.causal.value_or(false);
    o.scale = a.scale != 0 ? a.scale : in.softmax_scale.value_or(0);
    o.backward = a.backward;
    o.intermediates = a.intermediates;
    o.precision = a.bits;
    o.threads = a.threads;
    if (a.backward && !in.d_o) throw Error(fmt::format("{}: --backward needs a tensor 'do'", a.input));
    const analysis::AttentionTruth t = naming_input(a.input, [&] {
        return a.reference ? analysis::attention_truth_reference(in, o) : analysis::attention_truth(in, o);
    });

    std::vector<Tensor> out;
    out.push_back(f64_tensor("o", output_shape(in, {in.n_q, in.d_v}), t.o));
    out.push_back(f64_tensor("lse", output_shape(in, {in.n_q}), t.lse));
    if (a.backward) {
        out.push_back(f64_tensor("delta", output_shape(in, {in.n_q}), t.delta));
        out.push_back(f64_tensor("dq", output_shape(in, {in.n_q, in.d}), t.dq));
        out.push_back(f64_tensor("dk", output_shape(in, {in.n_kv, in.d}), t.dk));
        out.push_back(f64_tensor("dv", output_shape(in, {in.n_kv, in.d_v}), t.dv));
    }
    if (a.intermediates) {
        out.push_back(f64_tensor("s", output_shape(in, {in.n_q, in.n_kv}), t.s));
        out.push_back(f64_tensor("p", output_shape(in, {in.n_q, in.n_kv}), t.p));
    }
    write_tensor_file(a.output, out,
                      {{"source", a.input},
                       {"causal", o.causal ? "true" : "false"},
                       {"bias", in.bias ? "additive, from the input's tensor 'bias'" : "none"},
                       {"softmax_scale", format_double(t.scale)},
                       {"truth", "every value the float64 nearest the exact result"},
                       {"precision_bits", std::to_string(t.max_precision_used)}});
    if (a.json) {
        nlohmann::json names = nlohmann::json::array();
        for (const Tensor& x : out) names.push_back(x.name());
        fmt::print("{}\n", nlohmann::json{{"file", a.input},
                                          {"output", a.output},
                                          {"heads", t.heads},
                                          {"n_q", t.n_q},
                                          {"n_kv", t.n_kv},
                                          {"causal", o.causal},
                                          {"bias", in.bias.has_value()},
                                          {"softmax_scale", json_number(t.scale)},
                                          {"precision_bits", t.max_precision_used},
                                          {"fast_heads", t.fast_heads},
                                          {"tensors", names}}
                               .dump());
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
        ->check(CLI::Range(16, 1 << 14));
    cmd->add_flag("--backward", a->backward, "Also dq, dk, dv and delta (needs do)");
    cmd->add_flag("--intermediates", a->intermediates, "Also s and p");
    auto* causal = cmd->add_flag("--causal", a->causal, "Causal mask (default: the file's metadata, else off)");
    cmd->add_flag("--no-causal", a->no_causal, "No causal mask, whatever the file's metadata says")->excludes(causal);
    cmd->add_option("--softmax-scale,--scale", a->scale, "Softmax scale (default: the file's metadata, else 1/sqrt(D))")
        ->check(CLI::PositiveNumber);
    cmd->add_flag("--reference", a->reference, "Use the MPFI reference path for everything (slow; the same bits)");
    cmd->add_flag("--json", a->json, "Print one JSON object");
    cmd->add_option("--threads", a->threads, "Worker threads (default: all cores)")->check(CLI::NonNegativeNumber);
    cmd->callback([a] { run_truth(*a); });
}

}  // namespace roundscope::cli
