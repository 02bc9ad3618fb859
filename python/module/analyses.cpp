// The analyses (pcollapse, leak, headroom, bias, attribute) as library calls: the keyword
// arguments of the package's functions read into the library's typed requests (api/analyses.hpp),
// run without the GIL, their JSON handed back as Python objects. No command line in between.
#include <nanobind/stl/string.h>

#include "api/analyses.hpp"
#include "api/argument_checks.hpp"
#include "api/argument_error.hpp"
#include "lib/tensor_io.hpp"
#include "python/module/arrays.hpp"
#include "python/module/keywords.hpp"
#include "python/module/request_parts.hpp"

namespace roundscope::python {
namespace {

// The options that shape synthetic inputs alone: given with a file, refused rather than ignored.
constexpr const char* synthetic_only[] = {"n",       "d",         "seed",    "heads", "scenario", "sink_strength",
                                          "tie_gap", "tied_keys", "d_model", "steps"};

/// inputs (a path, arrays, or None) and synthetic with the synthetic sizes over `defaults`, the mask
/// and threads.
api::AnalysisInput analysis_input(Keywords& k, nb::handle inputs, api::AttentionSource defaults) {
    api::AnalysisInput in;
    in.source = inputs.is_none() ? std::move(defaults) : source_of(inputs, "inputs");
    if (!inputs.is_none()) in.source.spec = defaults.spec;
    in.source.synthetic = k.flag("synthetic").value_or(false) || inputs.is_none();
    if (!inputs.is_none() && in.source.synthetic)
        throw api::ArgumentError("synthetic", "give inputs or synthetic=True, not both");
    if (!in.source.synthetic)
        for (const char* name : synthetic_only)
            if (k.has(name)) throw api::ArgumentError(name, "applies to synthetic inputs only, not to a file");
    analysis::SyntheticSpec& s = in.source.spec;
    if (auto v = k.integer("n")) s.n = static_cast<std::uint64_t>(checked("n", *v, api::ranges::tokens));
    if (auto v = k.integer("d")) s.d = static_cast<std::uint64_t>(checked("d", *v, api::ranges::head_dim));
    if (auto v = k.seed("seed")) s.seed = *v;
    in.source.scenario = k.text("scenario");
    in.problem = problem_of(k);
    in.threads = threads_of(k);
    return in;
}

template <class Request, class Run>
nb::object answer(Keywords& k, const Request& request, Run run) {
    return to_python(run_released(k, request, run).json);
}

nb::object headroom(nb::handle inputs, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::HeadroomRequest r;
    r.input = analysis_input(k, inputs, r.input.source);
    return answer(k, r, api::headroom);
}

nb::object pcollapse(nb::handle inputs, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::PCollapseRequest r;
    r.input = analysis_input(k, inputs, r.input.source);
    analysis::SyntheticSpec& s = r.input.source.spec;
    if (auto v = k.integer("k_sink")) s.k_sink = static_cast<int>(checked("k_sink", *v, api::ranges::k_sink));
    if (auto v = k.number("sink_strength")) s.sink_strength = *v;
    if (auto v = k.numbers("scale")) r.scales = *v;
    if (auto v = k.text("order")) r.order = *v;
    r.sweep_scale = k.flag("sweep_scale").value_or(false);
    r.without_sink = k.flag("without_sink").value_or(false);
    r.recipe = recipe_choice(k, r.recipe);
    return answer(k, r, api::pcollapse);
}

nb::object leak(nb::handle inputs, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::LeakRequest r;
    r.input = analysis_input(k, inputs, r.input.source);
    if (auto v = k.text("format")) r.format = *v;
    if (auto v = k.integer("block")) r.block = static_cast<int>(checked("block", *v, api::ranges::block));
    if (auto v = k.integer("max_tokens"))
        r.max_tokens = static_cast<std::uint64_t>(checked("max_tokens", *v, api::ranges::max_tokens));
    r.fix = k.flag("fix").value_or(false);
    r.natural = k.flag("natural").value_or(false);
    r.recipe = recipe_choice(k, r.recipe);
    return answer(k, r, api::leak);
}

nb::object bias(nb::handle inputs, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::BiasRequest r;
    const bool many = nb::isinstance<nb::list>(inputs);
    r.input = analysis_input(k, many ? nb::none() : inputs, r.input.source);
    if (many) {
        if (k.has("synthetic") && k.flag("synthetic").value_or(false))
            throw api::ArgumentError("synthetic", "give inputs or synthetic=True, not both");
        for (const char* name : synthetic_only)
            if (k.has(name)) throw api::ArgumentError(name, "applies to synthetic inputs only, not to a file");
        r.input.source = {};
        const nb::list list = nb::cast<nb::list>(inputs);
        for (std::size_t i = 0; i < list.size(); ++i)
            r.files.push_back(source_of(list[i], "inputs[" + std::to_string(i) + "]"));
    } else if (!inputs.is_none()) {
        r.files.push_back(std::move(r.input.source));
        r.input.source = {};
    }
    analysis::SyntheticSpec& s = r.input.source.spec;
    if (auto v = k.integer("heads")) s.heads = static_cast<std::uint64_t>(checked("heads", *v, api::ranges::heads));
    if (auto v = k.integer("steps")) r.steps = static_cast<std::uint64_t>(checked("steps", *v, api::ranges::steps));
    if (auto v = k.number("tie_gap")) s.tie_gap = *v;
    if (auto v = k.integer("tied_keys"))
        s.tied_keys = static_cast<std::uint64_t>(checked("tied_keys", *v, api::ranges::tied_keys));
    if (auto v = k.integer("d_model"))
        s.d_model = static_cast<std::uint64_t>(checked("d_model", *v, api::ranges::d_model));
    r.fix = k.flag("fix").value_or(false);
    r.recipe = recipe_choice(k, r.recipe);
    return answer(k, r, api::bias);
}

nb::object attribute(nb::handle inputs, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::AttributeRequest r;
    r.input = analysis_input(k, inputs, r.input.source);
    r.recipe = recipe_choice(k, r.recipe);
    return answer(k, r, api::attribute);
}

}  // namespace

void bind_analyses(nb::module_& m) {
    const char* doc =
        "An analysis on inputs (a path, {tensor: (bytes, dtype, shape)}, or None: synthetic) with the "
        "keyword arguments of the package's function of the same name: its JSON result as Python objects.";
    m.def("headroom", &headroom, nb::arg("inputs").none(), nb::arg("kwargs"), doc);
    m.def("pcollapse", &pcollapse, nb::arg("inputs").none(), nb::arg("kwargs"), doc);
    m.def("leak", &leak, nb::arg("inputs").none(), nb::arg("kwargs"), doc);
    m.def("bias", &bias, nb::arg("inputs").none(), nb::arg("kwargs"), doc);
    m.def("attribute", &attribute, nb::arg("inputs").none(), nb::arg("kwargs"), doc);
}

}  // namespace roundscope::python
