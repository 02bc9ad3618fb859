#pragma once
// The parts every library request shares, read from a Python call's arguments: where the inputs
// come from, the mask and scale, the recipe, and an integer checked against its range.
#include <string>

#include <nanobind/nanobind.h>

#include "api/argument_checks.hpp"
#include "api/attention_source.hpp"
#include "api/recipe_choice.hpp"
#include "python/module/keywords.hpp"

namespace roundscope::python {

/// A file's source: a path, or {tensor: (bytes, dtype, shape)} the caller holds (its tensors are
/// the caller's arguments: an error about one names it), called `name` in messages.
api::AttentionSource source_of(nb::handle inputs, const std::string& name);

/// causal, softmax_scale, causal_alignment, window_left, window_right, softcap.
api::ProblemChoice problem_of(Keywords& k);

/// recipe and settings over `defaults`.
api::RecipeChoice recipe_choice(Keywords& k, api::RecipeChoice defaults);

/// `value`, or an ArgumentError naming `name` where it is outside `range`.
std::int64_t checked(const char* name, std::int64_t value, api::IntegerRange range);

/// threads (0 where not given), checked.
int threads_of(Keywords& k);

/// Every keyword read (Keywords::finish), then run(request) without the GIL: its result.
template <class Request, class Run>
auto run_released(Keywords& k, const Request& request, Run&& run) {
    k.finish();
    nb::gil_scoped_release released;
    return run(request);
}

}  // namespace roundscope::python
