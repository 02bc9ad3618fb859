#pragma once
// The recipe search as a library call: which recipe reproduces a kernel's outputs in one or more
// dumps bit for bit (analysis/recipe_fit.hpp).
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/recipe_fit.hpp"
#include "api/answer.hpp"
#include "api/attention_source.hpp"

namespace roundscope::api {

struct FitRequest {
    std::vector<FileSource> dumps;  // q, k, v and what the kernel wrote; fitted together
    ProblemChoice problem;
    std::vector<std::string> presets;    // where the search starts (empty: every preset)
    std::vector<std::string> keys;       // the keys it changes (empty: every key the outputs depend on)
    std::optional<std::string> outputs;  // comma-separated: o,lse,dq,dk,dv (none: all the dumps hold)
    analysis::FitOptions options;        // rows, seed, beam, max_evaluations, max_seconds, top, explain_rows,
                                         // threads, progress (outputs, presets and keys: from above)
};
/// The search; its JSON: files, best, exact, candidates, sampled, evaluations, refused, rounds,
/// seconds, stopped, divergence.
Answer<analysis::FitResult> fit(const FitRequest& request);

}  // namespace roundscope::api
