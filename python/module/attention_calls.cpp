// attention, truth, compare and mma as library calls (api/attention_calls.hpp, api/mma_call.hpp),
// and the catalogue (formats, recipes): keyword arguments into typed requests, run without the GIL, tensors and
// JSON handed back as Python objects.
#include <nanobind/stl/string.h>

#include "api/argument_error.hpp"
#include "api/attention_calls.hpp"
#include "api/catalog.hpp"
#include "api/check_call.hpp"
#include "api/fit_call.hpp"
#include "api/mma_call.hpp"
#include "api/mx_call.hpp"
#include "python/module/arrays.hpp"
#include "python/module/keywords.hpp"
#include "python/module/request_parts.hpp"

namespace roundscope::python {
namespace {

// (JSON, ({tensor: (bits, dtype)}, metadata)).
nb::tuple with_tensors(api::TensorAnswer answer) {
    TensorFile file;
    file.tensors = std::move(answer.tensors);
    file.metadata = std::move(answer.metadata);
    return nb::make_tuple(to_python(answer.json), to_python(std::move(file)));
}

nb::tuple attention(const nb::dict& tensors, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::AttentionRequest r;
    r.source = source_of(tensors, "inputs");
    r.problem = problem_of(k);
    r.recipe = recipe_choice(k, r.recipe);
    r.backward = k.flag("backward").value_or(false);
    r.truth = k.flag("truth").value_or(false);
    r.threads = threads_of(k);
    auto answer = run_released(k, r, api::attention);
    return with_tensors(std::move(answer));
}

nb::tuple truth(const nb::dict& tensors, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::TruthRequest r;
    r.source = source_of(tensors, "inputs");
    r.problem = problem_of(k);
    if (auto v = k.integer("bits")) r.bits = static_cast<int>(checked("bits", *v, api::ranges::truth_bits));
    r.backward = k.flag("backward").value_or(false);
    r.intermediates = k.flag("intermediates").value_or(false);
    r.reference = k.flag("reference").value_or(false);
    r.threads = threads_of(k);
    auto answer = run_released(k, r, api::truth);
    return with_tensors(std::move(answer));
}

nb::object compare(nb::handle dump, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::CompareRequest r;
    r.source = source_of(dump, "path");
    r.problem = problem_of(k);
    r.recipe = recipe_choice(k, r.recipe);
    r.outputs = k.text("outputs");
    r.rtol = k.number("rtol");
    r.atol = k.number("atol");
    r.threads = threads_of(k);
    auto json = run_released(k, r, api::compare).json;
    return to_python(json);
}

// D of a tensor-core model on {A, B, C}: (D's bits, its dtype).
nb::tuple mma(const nb::dict& tensors, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::MmaRequest r;
    r.source = source_of(tensors, "inputs");
    r.arch = k.text("arch");
    r.instruction = k.text("instruction");
    r.threads = threads_of(k);
    auto answer = run_released(k, r, api::mma);
    TensorFile file;
    file.tensors.push_back(std::move(answer.d));
    return to_python(std::move(file));
}

// A sequence of names (not a string, which would be one per letter).
std::vector<std::string> names_of(Keywords& k, const char* name) {
    return k.texts(name).value_or(std::vector<std::string>{});
}

nb::object fit(const nb::list& dumps, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::FitRequest r;
    for (std::size_t i = 0; i < dumps.size(); ++i)
        r.dumps.push_back(source_of(dumps[i], dumps.size() == 1 ? "dumps" : "dumps[" + std::to_string(i) + "]"));
    r.problem = problem_of(k);
    r.presets = names_of(k, "presets");
    r.keys = names_of(k, "keys");
    if (auto outputs = k.texts("outputs")) {
        std::string list;
        for (const std::string& o : *outputs) list += (list.empty() ? "" : ",") + o;
        r.outputs = list;
    }
    analysis::FitOptions& o = r.options;
    if (auto v = k.integer("rows")) o.rows = static_cast<std::uint64_t>(checked("rows", *v, api::ranges::fit_rows));
    if (auto v = k.seed("seed")) o.seed = *v;
    if (auto v = k.integer("beam")) o.beam = static_cast<std::size_t>(checked("beam", *v, api::ranges::beam));
    if (auto v = k.integer("max_evaluations"))
        o.max_evaluations = static_cast<std::size_t>(checked("max_evaluations", *v, api::ranges::max_evaluations));
    if (auto v = k.number("max_seconds")) o.max_seconds = *v;
    if (auto v = k.integer("top")) o.top = static_cast<std::size_t>(checked("top", *v, api::ranges::top));
    if (auto v = k.integer("explain_rows"))
        o.explain_rows = static_cast<std::uint64_t>(checked("explain_rows", *v, api::ranges::explain_rows));
    o.threads = threads_of(k);
    auto json = run_released(k, r, api::fit).json;
    return to_python(json);
}

api::MxRequest mx_request(const nb::dict& tensors, Keywords& k) {
    api::MxRequest r;
    r.source = source_of(tensors, "x");
    r.names = {"x"};
    r.format = k.text("format").value_or("");
    if (auto v = k.integer("block")) r.block = static_cast<int>(checked("block", *v, api::ranges::mx_block));
    if (auto v = k.integer("axis")) r.axis = static_cast<int>(checked("axis", *v, api::ranges::axis));
    if (auto v = k.integer("offset")) r.offset = static_cast<int>(checked("offset", *v, api::ranges::mx_offset));
    if (auto v = k.text("scale_rule")) r.scale_rule = *v;
    r.rounding = k.text("rounding").value_or("");
    r.seed = k.seed("seed").value_or(0);
    r.single_level = k.flag("single_level").value_or(false);
    r.threads = threads_of(k);
    return r;
}

// x block-quantized: (JSON, ({x.elements, x.scales[, x.per_tensor_scale]: (bits, dtype)}, metadata)).
nb::tuple mx_quantize(const nb::dict& tensors, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    return with_tensors(run_released(k, mx_request(tensors, k), api::mx_quantize));
}

nb::object mx_compare_rules(const nb::dict& tensors, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    return to_python(run_released(k, mx_request(tensors, k), api::mx_compare_rules));
}

nb::object check(const std::string& dir, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::CheckRequest r;
    r.dir = dir;
    r.junit = k.text("junit");
    analysis::DumpTolerance& t = r.tolerance;
    if (auto v = k.integer("max_ulp"))
        t.max_ulp = static_cast<std::uint64_t>(checked("max_ulp", *v, api::ranges::max_ulp));
    t.max_row_ulp = k.number("max_row_ulp");
    t.min_match = k.number("min_match");
    const std::optional<double> rtol = k.number("rtol"), atol = k.number("atol");
    if (rtol.has_value() != atol.has_value())
        throw api::ArgumentError(rtol ? "atol" : "rtol", rtol ? "needed beside rtol" : "needed beside atol");
    if (rtol) t.close = analysis::Tolerance{*rtol, *atol};
    r.threads = threads_of(k);
    auto json = run_released(k, r, [](const api::CheckRequest& request) { return api::check(request); }).json;
    return to_python(json);
}

}  // namespace

void bind_attention_calls(nb::module_& m) {
    m.def("attention", &attention, nb::arg("tensors"), nb::arg("kwargs"),
          "A recipe's attention on {tensor: (bytes, dtype, shape)} (the caller's arguments): (JSON, (tensors, "
          "metadata)).");
    m.def("truth", &truth, nb::arg("tensors"), nb::arg("kwargs"),
          "The exact attention of {tensor: (bytes, dtype, shape)}: (JSON, (tensors, metadata)).");
    m.def("compare", &compare, nb::arg("dump"), nb::arg("kwargs"),
          "A dump (a path or {tensor: (bytes, dtype, shape)}) against the truth and a recipe: its JSON.");
    m.def("mma", &mma, nb::arg("tensors"), nb::arg("kwargs"),
          "D = A B + C on a tensor core's model for {A, B, C: (bytes, dtype, shape)}: ({\"D\": (bits, dtype)}, "
          "metadata).");
    m.def("fit", &fit, nb::arg("dumps"), nb::arg("kwargs"),
          "The recipe search over dumps (paths or {tensor: (bytes, dtype, shape)}): its JSON.");
    m.def("check", &check, nb::arg("dir"), nb::arg("kwargs"),
          "Every golden file under dir checked (bit for bit, or within the tolerances given): the JSON.");
    m.def("mx_quantize", &mx_quantize, nb::arg("tensors"), nb::arg("kwargs"),
          "{\"x\": (bytes, dtype, shape)} block-quantized: (JSON, (tensors, metadata)).");
    m.def("mx_compare_rules", &mx_compare_rules, nb::arg("tensors"), nb::arg("kwargs"),
          "The scale rules compared on {\"x\": (bytes, dtype, shape)}: the JSON.");
    m.def(
        "formats", [] { return to_python(api::formats_json()); }, "Every number format: {\"formats\": [...]}.");
    m.def(
        "recipes", [] { return to_python(api::recipes_json()); }, "The recipes, their keys and the kernels.");
}

}  // namespace roundscope::python
