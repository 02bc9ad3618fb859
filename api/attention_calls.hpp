#pragma once
// Attention itself as library calls: a recipe's emulated attention, the exact truth, and a
// kernel's dump compared against both. Each takes a typed request checked before any work and
// gives its tensors (with the metadata a file of them carries) beside its JSON.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/kernel_compare.hpp"
#include "api/answer.hpp"
#include "api/attention_source.hpp"
#include "api/recipe_choice.hpp"
#include "lib/tensor.hpp"

namespace roundscope::api {

/// Tensors, the metadata a file of them carries, and the JSON result.
struct TensorAnswer {
    std::vector<Tensor> tensors;
    std::map<std::string, std::string> metadata;
    nlohmann::json json;
};

struct AttentionRequest {
    AttentionSource source;  // a file of q, k, v (and do)
    ProblemChoice problem;
    RecipeChoice recipe;  // required
    bool backward = false, truth = false;
    int threads = 0;
};
/// o, lse (and dq, dk, dv, delta with backward); the JSON: file, recipe, settings, heads, n_q,
/// n_kv, d, d_v, causal, softmax_scale (and each output's errors with truth).
TensorAnswer attention(const AttentionRequest& request);

struct TruthRequest {
    AttentionSource source;
    ProblemChoice problem;
    int bits = 256;  // the first attempt's precision, doubled until every output is decided
    bool backward = false, intermediates = false, reference = false;
    int threads = 0;
};
/// o, lse (delta, dq, dk, dv with backward; s, p with intermediates) as float64.
TensorAnswer truth(const TruthRequest& request);

struct CompareRequest {
    AttentionSource source;  // a dump: q, k, v and what the kernel wrote
    ProblemChoice problem;
    RecipeChoice recipe;                 // required
    std::optional<std::string> outputs;  // comma-separated: o,lse,dq,dk,dv (none: all the dump holds)
    std::optional<double> rtol, atol;    // both or neither
    int threads = 0;
};
/// The comparison; its JSON: compare_json with file, recipe, causal and softmax_scale.
Answer<analysis::KernelComparison> compare(const CompareRequest& request);

}  // namespace roundscope::api
