#pragma once
// The analyses as library calls: a typed request each, checked before any work, and its typed
// result beside the JSON of docs/cli.md. The command line and the Python package are both front
// ends of these (cli/commands/, python/module/analyses.cpp): they fill a request from their own
// arguments and present what comes back.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/attribute.hpp"
#include "analysis/bias_steps.hpp"
#include "analysis/headroom.hpp"
#include "analysis/leak.hpp"
#include "analysis/pcollapse.hpp"
#include "api/answer.hpp"
#include "api/attention_source.hpp"
#include "api/recipe_choice.hpp"

namespace roundscope::api {

/// What an analysis runs on: its inputs, their mask and scale, and its worker threads.
struct AnalysisInput {
    AttentionSource source;
    ProblemChoice problem;
    int threads = 0;  // 0: all cores
};

struct HeadroomRequest {
    AnalysisInput input;
    HeadroomRequest() { input.source.spec.scenario = analysis::Scenario::wide; }
};
Answer<analysis::HeadroomResult> headroom(const HeadroomRequest& request);

struct PCollapseRequest {
    AnalysisInput input;  // the source's spec holds k_sink (any input) and sink_strength (synthetic)
    // the paper's set-up: float32 Q, K, V, only P cast to E4M3 (fp8-forward-order, or the setting
    // input=e4m3, for a kernel that also holds its inputs in E4M3)
    RecipeChoice recipe{"fp8-p-cast-only", {}};
    std::vector<double> scales;  // static P scales S; empty: 1 and 256
    std::string order = "both";  // forward, reverse or both
    bool sweep_scale = false, without_sink = false;
    PCollapseRequest() {
        input.source.spec.scenario = analysis::Scenario::sink;
        input.source.spec.n = 1024;
    }
};
/// The options the request makes (its recipe, orders, scales, sink), checked.
analysis::PCollapseOptions pcollapse_options(const PCollapseRequest& request);
Answer<analysis::PCollapseResult> pcollapse(const PCollapseRequest& request);

struct LeakRequest {
    AnalysisInput input;           // always causal: a request with causal false is refused
    std::string format = "mxfp4";  // V's block format, or none
    int block = 32;
    bool fix = false, natural = false;
    RecipeChoice recipe{"mxfp4-v", {}};
    std::uint64_t max_tokens = 512;
};
Answer<analysis::LeakResult> leak(const LeakRequest& request);

struct BiasRequest {
    AnalysisInput input;                 // synthetic inputs (source.synthetic), or none of its source: `files`
    std::vector<AttentionSource> files;  // one per training step
    std::uint64_t steps = 1;             // synthetic: steps of seeds seed, seed + 1, ...
    RecipeChoice recipe{"fa2-bf16", {}};
    bool fix = false;
    BiasRequest() {
        input.source.spec.scenario = analysis::Scenario::repeated_max;
        input.source.spec.n = 512, input.source.spec.heads = 2;
    }
};
Answer<analysis::BiasSteps> bias(const BiasRequest& request);

struct AttributeRequest {
    AnalysisInput input;
    RecipeChoice recipe;  // required
};
Answer<analysis::AttributeResult> attribute(const AttributeRequest& request);

}  // namespace roundscope::api
