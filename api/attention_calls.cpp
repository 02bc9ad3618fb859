#include "api/attention_calls.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "analysis/attention_run.hpp"
#include "analysis/kernel_compare.hpp"
#include "analysis/truth/attention_truth.hpp"
#include "api/analysis_json.hpp"
#include "api/argument_checks.hpp"
#include "api/argument_error.hpp"
#include "api/json_numbers.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/backward_refusal.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/mem_eff_backward.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "lib/memory_budget.hpp"

namespace roundscope::api {
namespace {

template <class Bits>
Tensor tensor_of(const std::string& name, const emu::Format& f, Shape shape, const std::vector<Bits>& x) {
    return Tensor::of_bits(name, emu::dtype_of(f), std::move(shape), x);
}

nlohmann::json stats_json(const analysis::ErrorStats& s) {
    return {{"max_abs", json_number(s.max_abs)}, {"rms", json_number(s.rms)}, {"rel_rms", json_number(s.rel_rms)}};
}

// The inputs of a file request, checked first.
ChosenInputs file_request_inputs(const char* command, const AttentionSource& source, const ProblemChoice& problem,
                                 int threads) {
    check_in("threads", threads, ranges::threads);
    if (!source.has_file()) throw Error(std::string(command) + ": needs an input file");
    return choose_inputs(command, source, problem);
}

}  // namespace

TensorAnswer attention(const AttentionRequest& request) {
    const emu::AttentionRecipe recipe = recipe_of(request.recipe);
    const ChosenInputs c = file_request_inputs("attention", request.source, request.problem, request.threads);
    const emu::AttentionInputs& in = c.in;
    check_memory(attention_bytes(in, request.backward, request.truth, request.threads), request.source.name);
    analysis::AttentionRunOptions o;
    o.causal = c.causal, o.scale = c.softmax_scale;
    o.backward = request.backward, o.truth = request.truth, o.threads = request.threads;
    const analysis::AttentionRun r =
        naming_input(request.source, [&] { return analysis::run_attention(in, recipe, o); });

    TensorAnswer a;
    a.tensors.push_back(tensor_of("o", *recipe.output.format, output_shape(in, {in.n_q, in.d_v}), r.forward.o));
    a.tensors.push_back(tensor_of("lse", emu::f32, output_shape(in, {in.n_q}), r.forward.lse));
    if (r.backward) {
        a.tensors.push_back(
            tensor_of("dq", *recipe.backward.grad_format, output_shape(in, {in.n_q, in.d}), r.backward->dq));
        a.tensors.push_back(
            tensor_of("dk", *recipe.backward.grad_format, kv_output_shape(in, {in.n_kv, in.d}), r.backward->dk));
        a.tensors.push_back(
            tensor_of("dv", *recipe.backward.grad_format, kv_output_shape(in, {in.n_kv, in.d_v}), r.backward->dv));
        a.tensors.push_back(tensor_of("delta", emu::f32, output_shape(in, {in.n_q}), r.backward->delta));
    }
    const nlohmann::json settings(emu::recipe_settings(recipe));
    const double scale = static_cast<double>(r.shape.scale);
    a.metadata = {{"source", request.source.name},
                  {"recipe", recipe.name},
                  {"recipe_settings", settings.dump()},
                  {"causal", o.causal ? "true" : "false"},
                  {"softmax_scale", format_double(scale)}};
    a.json = {{"file", request.source.name},
              {"recipe", recipe.name},
              {"settings", settings},
              {"heads", r.shape.heads},
              {"n_q", r.shape.n_q},
              {"n_kv", r.shape.n_kv},
              {"d", r.shape.d},
              {"causal", o.causal},
              {"softmax_scale", json_number(scale)}};
    if (request.truth) {
        nlohmann::json errors = nlohmann::json::object();
        for (const auto& [name, s] : r.errors) errors[name] = stats_json(s);
        a.json["errors"] = errors;
    }
    return a;
}

TensorAnswer truth(const TruthRequest& request) {
    check_in("bits", request.bits, ranges::truth_bits);
    const ChosenInputs c = file_request_inputs("truth", request.source, request.problem, request.threads);
    const emu::AttentionInputs& in = c.in;
    if (request.backward && !in.d_o)
        throw ArgumentError("backward", fmt::format("needs a tensor 'do', which {} lacks", request.source.name));
    double bytes = attention_bytes(in, request.backward, true, request.threads);
    if (request.intermediates) bytes += 2 * 8 * static_cast<double>(in.batch * in.heads * in.n_q * in.n_kv);
    check_memory(bytes, request.source.name);
    analysis::TruthOptions o;
    o.causal = c.causal, o.scale = c.softmax_scale;
    o.backward = request.backward, o.intermediates = request.intermediates;
    o.precision = request.bits, o.threads = request.threads;
    const analysis::AttentionTruth t = naming_input(request.source, [&] {
        return request.reference ? analysis::attention_truth_reference(in, o) : analysis::attention_truth(in, o);
    });

    TensorAnswer a;
    auto f64 = [&](const std::string& name, Shape shape, const std::vector<double>& x) {
        a.tensors.push_back(Tensor::of_bits(name, DType::f64, std::move(shape), x));
    };
    f64("o", output_shape(in, {in.n_q, in.d_v}), t.o);
    f64("lse", output_shape(in, {in.n_q}), t.lse);
    if (request.backward) {
        f64("delta", output_shape(in, {in.n_q}), t.delta);
        f64("dq", output_shape(in, {in.n_q, in.d}), t.dq);
        f64("dk", kv_output_shape(in, {in.n_kv, in.d}), t.dk);
        f64("dv", kv_output_shape(in, {in.n_kv, in.d_v}), t.dv);
    }
    if (request.intermediates) {
        f64("s", output_shape(in, {in.n_q, in.n_kv}), t.s);
        f64("p", output_shape(in, {in.n_q, in.n_kv}), t.p);
    }
    a.metadata = {
        {"source", request.source.name},
        {"causal", o.causal ? "true" : "false"},
        {"bias", in.mask.dense.empty() ? "none" : "from the input's tensor '" + in.mask.dense[0].tensor().name() + "'"},
        {"mask", in.mask.describe(o.causal)},
        {"softcap", format_double(in.softcap)},
        {"softmax_scale", format_double(t.scale)},
        {"truth", "every value the float64 nearest the exact result"},
        {"precision_bits", std::to_string(t.max_precision_used)}};
    nlohmann::json names = nlohmann::json::array();
    for (const Tensor& x : a.tensors) names.push_back(x.name());
    a.json = {{"file", request.source.name},
              {"heads", t.heads},
              {"n_q", t.n_q},
              {"n_kv", t.n_kv},
              {"d", t.d},
              {"d_v", t.d_v},
              {"causal", o.causal},
              {"bias", !in.mask.dense.empty()},
              {"mask", in.mask.describe(o.causal)},
              {"kv_heads", t.kv_heads},
              {"softcap", json_number(in.softcap)},
              {"softmax_scale", json_number(t.scale)},
              {"precision_bits", t.max_precision_used},
              {"fast_heads", t.fast_heads},
              {"tensors", names}};
    return a;
}

Answer<analysis::KernelComparison> compare(const CompareRequest& request) {
    const emu::AttentionRecipe recipe = recipe_of(request.recipe);
    check_in("threads", request.threads, ranges::threads);
    analysis::CompareChoice choice;
    if (request.outputs)
        choice.outputs = for_argument("outputs", [&] { return analysis::parse_output_names(*request.outputs, ""); });
    if (request.rtol.has_value() != request.atol.has_value())
        throw ArgumentError(request.rtol ? "atol" : "rtol", request.rtol ? "needed beside rtol" : "needed beside atol");
    if (request.rtol) {
        check_in("rtol", *request.rtol, ranges::tolerance);
        check_in("atol", *request.atol, ranges::tolerance);
        choice.tolerance = analysis::Tolerance{*request.rtol, *request.atol};
    }
    if (!request.source.has_file()) throw Error("compare: needs an input file");
    validate(request.problem);
    const TensorFile file = naming_input(request.source, [&] { return request.source.read(); });
    const ChosenInputs c = naming_input(request.source, [&] { return file_inputs(file, request.problem); });
    // A dump with gradients against a recipe whose backward is not modelled (for this shape): its
    // forward outputs compared, and the output says so (asked for by name, the gradients are refused).
    std::string forward_only;
    const emu::AttentionShape shape = emu::attention_shape_of(c.in, c.causal, c.softmax_scale);
    if (const std::string why = naming_input(request.source, [&] { return emu::backward_refusal(recipe, shape); });
        !why.empty() && choice.outputs.empty() &&
        std::any_of(analysis::kernel_output_names().begin(), analysis::kernel_output_names().end(),
                    [&](const std::string& n) { return n[0] == 'd' && file.find(n) != nullptr; })) {
        for (const char* n : {"o", "lse"})
            if (file.find(n) != nullptr) choice.outputs.emplace_back(n);
        if (choice.outputs.empty()) throw Error(why);
        forward_only = why + ": the dump's gradients are not compared, its forward outputs are";
    }
    const bool gradients = choice.outputs.empty() ? c.in.d_o.has_value()
                                                  : std::any_of(choice.outputs.begin(), choice.outputs.end(),
                                                                [](const std::string& n) { return n[0] == 'd'; });
    check_memory(attention_bytes(c.in, gradients, true, request.threads), request.source.name);
    analysis::AttentionRunOptions o;
    o.causal = c.causal, o.scale = c.softmax_scale, o.threads = request.threads;
    analysis::KernelComparison r =
        naming_input(request.source, [&] { return analysis::compare_kernel(file, c.in, recipe, o, choice); });
    nlohmann::json j = compare_json(r);
    j["file"] = request.source.name;
    j["recipe"] = recipe.name;
    j["causal"] = c.causal;
    j["softmax_scale"] = json_number(static_cast<double>(r.shape.scale));
    j["notes"] = nlohmann::json::array();
    const bool dq = std::any_of(r.outputs.begin(), r.outputs.end(),
                                [](const analysis::OutputComparison& x) { return x.name == "dq"; });
    if (const std::string note = emu::dq_order_note(recipe, r.shape.n_kv, r.shape.d); dq && !note.empty())
        j["notes"].push_back(note);
    if (const std::string note = emu::cudnn_backward_note(recipe, r.shape.n_q, r.shape.n_kv); dq && !note.empty())
        j["notes"].push_back(note);
    if (dq && recipe.backward.schedule == emu::GradSchedule::mem_eff)  // the plan ran: the backward did
        if (const std::string note = emu::mem_eff_dq_note(emu::mem_eff_backward_plan(
                recipe, emu::launched_heads(r.shape), r.shape.n_q, r.shape.n_kv, std::max(r.shape.d, r.shape.d_v),
                r.shape.causal, emu::causal_alignment(r.shape)));
            !note.empty())
            j["notes"].push_back(note);
    if (!forward_only.empty()) j["notes"].push_back(forward_only);
    return {std::move(r), std::move(j)};
}

}  // namespace roundscope::api
