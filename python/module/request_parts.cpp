#include "python/module/request_parts.hpp"

#include <memory>

#include <nanobind/stl/string.h>

#include "lib/tensor_io.hpp"
#include "python/module/arrays.hpp"

namespace roundscope::python {

api::AttentionSource source_of(nb::handle inputs, const std::string& name) {
    api::AttentionSource s;
    if (nb::isinstance<nb::str>(inputs)) {
        const std::string path = nb::cast<std::string>(inputs);
        s.name = path;
        s.read = [path] { return read_tensor_file(path); };
    } else {
        auto file = std::make_shared<const TensorFile>(tensor_file(name, nb::cast<nb::dict>(inputs)));
        s.name = name, s.tensors_are_arguments = true;
        s.read = [file] { return *file; };
    }
    return s;
}

api::ProblemChoice problem_of(Keywords& k) {
    api::ProblemChoice m;
    m.causal = k.flag("causal");
    m.softmax_scale = k.number("softmax_scale");
    m.causal_alignment = k.text("causal_alignment");
    m.window_left = k.integer("window_left");
    m.window_right = k.integer("window_right");
    m.softcap = k.number("softcap");
    m.launch_heads = k.integer("launch_heads");
    return m;
}

api::RecipeChoice recipe_choice(Keywords& k, api::RecipeChoice defaults) {
    if (auto name = k.text("recipe")) defaults.name = *name;
    if (auto settings = k.settings("settings")) defaults.settings = *settings;
    return defaults;
}

std::int64_t checked(const char* name, std::int64_t value, api::IntegerRange range) {
    api::check_in(name, value, range);
    return value;
}

int threads_of(Keywords& k) {
    return static_cast<int>(checked("threads", k.integer("threads").value_or(0), api::ranges::threads));
}

}  // namespace roundscope::python
