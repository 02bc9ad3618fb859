// The analyses' library calls (api/analyses.hpp): every argument out of its range refused before
// any work as an ArgumentError naming it (the front ends name it their own way from that), errors
// about a caller's own tensors named after the tensor, and the JSON the same as the analysis's own.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "api/analyses.hpp"
#include "api/analysis_json.hpp"
#include "api/argument_error.hpp"

namespace api = roundscope::api;
using roundscope::Error;
using roundscope::Tensor;
using roundscope::TensorError;
using roundscope::TensorFile;

namespace {

// The argument the call refuses, or "" where it throws no ArgumentError.
std::string refused(const std::function<void()>& call) {
    try {
        call();
    } catch (const api::ArgumentError& e) {
        CHECK(std::string(e.what()) == e.argument() + ": " + e.detail());
        return e.argument();
    }
    return "";
}

api::AnalysisInput synthetic(std::uint64_t n = 64, std::uint64_t d = 16) {
    api::AnalysisInput in;
    in.source.synthetic = true;
    in.source.spec.n = n, in.source.spec.d = d;
    return in;
}

// q, k, v of 8 tokens, D 4, and an additive mask holding a NaN, as a caller's arrays.
TensorFile arrays_with_a_nan_mask() {
    TensorFile f;
    f.path = "inputs";
    const std::vector<float> x(32, 0.5f);
    for (const char* name : {"q", "k", "v"})
        f.tensors.push_back(Tensor::of_bits(name, roundscope::DType::f32, {8, 4}, x));
    std::vector<float> mask(64, 0.0f);
    mask[5] = std::numeric_limits<float>::quiet_NaN();
    f.tensors.push_back(Tensor::of_bits("attn_mask", roundscope::DType::f32, {8, 8}, mask));
    return f;
}

}  // namespace

TEST_CASE("each analysis refuses an argument out of its range, naming it") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto headroom = [](auto change) {
        return [change] {
            api::HeadroomRequest r;
            r.input = synthetic();
            change(r);
            api::headroom(r);
        };
    };
    CHECK(refused(headroom([](auto& r) { r.input.source.spec.n = 0; })) == "n");
    CHECK(refused(headroom([](auto& r) { r.input.source.spec.d = 1; })) == "d");
    CHECK(refused(headroom([](auto& r) { r.input.threads = -1; })) == "threads");
    CHECK(refused(headroom([&](auto& r) { r.input.problem.softmax_scale = nan; })) == "softmax_scale");
    CHECK(refused(headroom([](auto& r) { r.input.problem.window_left = -3; })) == "window_left");
    CHECK(refused(headroom([](auto& r) { r.input.problem.causal_alignment = "middle"; })) == "causal_alignment");

    auto pcollapse = [](auto change) {
        return [change] {
            api::PCollapseRequest r;
            r.input = synthetic();
            change(r);
            api::pcollapse(r);
        };
    };
    CHECK(refused(pcollapse([](auto& r) { r.input.source.spec.k_sink = 0; })) == "k_sink");
    CHECK(refused(pcollapse([](auto& r) { r.input.source.spec.k_sink = 64; })) == "k_sink");  // none left to measure
    CHECK(refused(pcollapse([&](auto& r) { r.input.source.spec.sink_strength = nan; })) == "sink_strength");
    CHECK(refused(pcollapse([](auto& r) { r.scales = {256, 0}; })) == "scale");
    CHECK(refused(pcollapse([](auto& r) { r.order = "sideways"; })) == "order");
    CHECK(refused(pcollapse([](auto& r) { r.recipe.name = "fa9"; })) == "recipe");
    CHECK(refused(pcollapse([](auto& r) { r.recipe.settings = {"p_scal=1"}; })) == "settings");

    auto leak = [](auto change) {
        return [change] {
            api::LeakRequest r;
            r.input = synthetic();
            change(r);
            api::leak(r);
        };
    };
    CHECK(refused(leak([](auto& r) { r.format = "mxfp5"; })) == "format");
    CHECK(refused(leak([](auto& r) { r.block = 0; })) == "block");
    CHECK(refused(leak([](auto& r) { r.max_tokens = 0; })) == "max_tokens");
    CHECK(refused(leak([](auto& r) { r.input.problem.causal = false; })) == "causal");

    auto bias = [](auto change) {
        return [change] {
            api::BiasRequest r;
            r.input = synthetic();
            change(r);
            api::bias(r);
        };
    };
    CHECK(refused(bias([](auto& r) { r.steps = 0; })) == "steps");
    CHECK(refused(bias([](auto& r) { r.input.source.spec.d_model = 1; })) == "d_model");
    CHECK(refused(bias([](auto& r) { r.input.source.spec.tied_keys = 64; })) == "tied_keys");
    CHECK(refused(bias([&](auto& r) { r.input.source.spec.tie_gap = nan; })) == "tie_gap");

    api::AttributeRequest attribute;
    attribute.input = synthetic();
    CHECK(refused([&] { api::attribute(attribute); }) == "recipe");  // a recipe is required
}

TEST_CASE("a request with both a file and synthetic inputs, or neither, is refused") {
    api::HeadroomRequest r;
    r.input.source.synthetic = false;
    CHECK_THROWS_WITH(api::headroom(r), "headroom: give an input file or synthetic inputs, not both");
    api::BiasRequest b;
    b.input = synthetic();
    b.files.push_back(b.input.source);
    CHECK_THROWS_WITH(api::bias(b), "bias: give input files or synthetic inputs, not both");
}

TEST_CASE("an error about a caller's own tensor names the tensor - about a file's, the file and the tensor") {
    const TensorFile file = arrays_with_a_nan_mask();
    api::HeadroomRequest r;
    r.input.source.name = "inputs";
    r.input.source.read = [file] { return file; };
    r.input.source.tensors_are_arguments = true;
    try {
        api::headroom(r);
        FAIL("a NaN in an additive mask was taken");
    } catch (const api::ArgumentError& e) {
        CHECK(e.argument() == "attn_mask");
        CHECK(std::string(e.what()).starts_with("attn_mask: holds NaN (element 5)"));
    }
    r.input.source.name = "step.safetensors";
    r.input.source.read = [file] {
        TensorFile f = file;
        f.path = "step.safetensors";
        return f;
    };
    r.input.source.tensors_are_arguments = false;
    try {
        api::headroom(r);
        FAIL("a NaN in an additive mask was taken");
    } catch (const TensorError& e) {
        CHECK(e.file() == "step.safetensors");
        CHECK(std::string(e.what()).starts_with("step.safetensors: tensor 'attn_mask' holds NaN (element 5)"));
    }
}

TEST_CASE("a request's JSON is the analysis's own, on the inputs the request names") {
    api::HeadroomRequest r;
    r.input = synthetic(96, 32);
    r.input.source.scenario = "sink";
    r.input.problem.causal = true;
    const api::Answer answer = api::headroom(r);
    roundscope::analysis::SyntheticSpec spec = r.input.source.spec;
    spec.scenario = roundscope::analysis::Scenario::sink;
    roundscope::analysis::HeadroomOptions o;
    o.causal = true;
    const auto direct = roundscope::analysis::headroom(roundscope::analysis::synthetic_attention(spec), o);
    CHECK(answer.json == api::headroom_json(direct, true));
    CHECK(answer.result.rows.size() == 96);
}
