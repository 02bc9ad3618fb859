// attention, truth and compare as library calls (api/attention_calls.hpp), and the catalogue
// (formats, recipes): keyword arguments into typed requests, run without the GIL, tensors and
// JSON handed back as Python objects.
#include <nanobind/stl/string.h>

#include "api/attention_calls.hpp"
#include "api/catalog.hpp"
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
    r.mask = mask_of(k);
    r.recipe = recipe_choice(k, r.recipe);
    r.backward = k.flag("backward").value_or(false);
    r.truth = k.flag("truth").value_or(false);
    r.threads = threads_of(k);
    k.finish();
    api::TensorAnswer answer;
    {
        nb::gil_scoped_release released;
        answer = api::attention(r);
    }
    return with_tensors(std::move(answer));
}

nb::tuple truth(const nb::dict& tensors, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::TruthRequest r;
    r.source = source_of(tensors, "inputs");
    r.mask = mask_of(k);
    if (auto v = k.integer("bits")) r.bits = static_cast<int>(checked("bits", *v, api::ranges::truth_bits));
    r.backward = k.flag("backward").value_or(false);
    r.intermediates = k.flag("intermediates").value_or(false);
    r.reference = k.flag("reference").value_or(false);
    r.threads = threads_of(k);
    k.finish();
    api::TensorAnswer answer;
    {
        nb::gil_scoped_release released;
        answer = api::truth(r);
    }
    return with_tensors(std::move(answer));
}

nb::object compare(nb::handle dump, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::CompareRequest r;
    r.source = source_of(dump, "path");
    r.mask = mask_of(k);
    r.recipe = recipe_choice(k, r.recipe);
    r.outputs = k.text("outputs");
    r.rtol = k.number("rtol");
    r.atol = k.number("atol");
    r.threads = threads_of(k);
    k.finish();
    nlohmann::json json;
    {
        nb::gil_scoped_release released;
        json = api::compare(r).json;
    }
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
    m.def("formats", [] { return to_python(api::formats_json()); }, "Every number format: {\"formats\": [...]}.");
    m.def("recipes", [] { return to_python(api::recipes_json()); }, "The recipes, their keys and the kernels.");
}

}  // namespace roundscope::python
