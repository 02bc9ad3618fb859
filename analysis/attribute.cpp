#include "analysis/attribute.hpp"

#include <map>
#include <string>
#include <vector>

#include "analysis/attention_run.hpp"
#include "analysis/truth/attention_truth.hpp"
#include "analysis/truth_cache.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_context.hpp"
#include "emu/attention/inputs/head_inputs.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/numbers/unpack.hpp"

namespace roundscope::analysis {
namespace {

// One stage of a recipe that can be made exact. A stage the recipe already runs exactly (a
// float32 softmax, a float32 running O) is not listed.
struct Stage {
    const char* name;
    bool (*applies)(const emu::AttentionRecipe&);
    void (*make_exact)(emu::AttentionRecipe&);
};
constexpr Stage stages[] = {
    // block quantization (MX): Q and K along D, P along keys, V along tokens
    {"Q K quantization", [](const emu::AttentionRecipe& r) { return r.scores.qk_quant != nullptr; },
     [](emu::AttentionRecipe& r) { r.scores.qk_quant = nullptr; }},
    {"score product", [](const emu::AttentionRecipe&) { return true; },
     [](emu::AttentionRecipe& r) { r.scores.product = emu::Product::exact_f64; }},
    // online-torch: S and the row max stored in BF16; naive: exp and division. The row sum keeps
    // its format: it is the next stage.
    {"softmax format", [](const emu::AttentionRecipe& r) { return *r.softmax.format != emu::f32; },
     [](emu::AttentionRecipe& r) {
         if (r.softmax.row_sum_format == nullptr) r.softmax.row_sum_format = r.softmax.format;
         r.softmax.format = &emu::f32;
     }},
    // the row sum l (naive and online-torch softmax; the online softmax keeps it in float32)
    {"row sum format",
     [](const emu::AttentionRecipe& r) {
         const emu::Format& l = r.softmax.stored_row_sum();
         return r.softmax.kind != emu::SoftmaxKind::online && l != emu::f32;
     },
     [](emu::AttentionRecipe& r) { r.softmax.row_sum_format = &emu::f32; }},
    {"P quantization", [](const emu::AttentionRecipe& r) { return r.p_and_v.p_quant != nullptr; },
     [](emu::AttentionRecipe& r) { r.p_and_v.p_quant = nullptr; }},
    {"P cast", [](const emu::AttentionRecipe&) { return true; },
     [](emu::AttentionRecipe& r) { r.p_and_v.p_format = &emu::f32, r.p_and_v.p_scale = 1; }},
    {"V quantization", [](const emu::AttentionRecipe& r) { return r.p_and_v.v_quant != nullptr; },
     [](emu::AttentionRecipe& r) { r.p_and_v.v_quant = nullptr; }},
    {"P V product", [](const emu::AttentionRecipe&) { return true; },
     [](emu::AttentionRecipe& r) { r.p_and_v.product = emu::Product::exact_f64; }},
    // each block's P-bar V and the rescaled O stored in the running format
    {"running O", [](const emu::AttentionRecipe& r) { return *r.output.accumulator != emu::f32; },
     [](emu::AttentionRecipe& r) { r.output.accumulator = &emu::f32; }},
    {"O cast", [](const emu::AttentionRecipe&) { return true; },
     [](emu::AttentionRecipe& r) { r.output.format = &emu::f32; }},
};

// The recipe with the listed stages made exact (exact[i]: listed[i]); empty where the
// combination has no kernel: float32 P through a tensor-core P V product (no tensor core takes it).
std::optional<emu::AttentionRecipe> with_exact(emu::AttentionRecipe r, const std::vector<const Stage*>& listed,
                                               const std::vector<bool>& exact) {
    for (std::size_t i = 0; i < listed.size(); ++i)
        if (exact[i]) listed[i]->make_exact(r);
    if (*r.p_and_v.p_format == emu::f32 && r.p_and_v.product == emu::Product::model) return std::nullopt;
    return r;
}

}  // namespace

AttributeResult attribute(const emu::AttentionInputs& given, const AttributeOptions& o) {
    // k and v indexed by query head (the truth cache knows the inputs by their address: kept)
    const emu::AttentionInputs expanded =
        emu::kv_group(given) > 1 ? emu::kv_per_query_head(given) : emu::AttentionInputs{};
    const emu::AttentionInputs& in = emu::kv_group(given) > 1 ? expanded : given;
    const emu::AttentionRecipe& recipe = o.recipe;
    const emu::AttentionShape sh = emu::attention_shape_of(in, o.causal, o.softmax_scale);
    const emu::AttentionOperands x = emu::attention_operands(in, *recipe.target.input, in.d_o.has_value());
    TruthOptions t;
    t.causal = o.causal, t.scale = static_cast<double>(sh.scale), t.threads = o.threads,
    t.backward = in.d_o.has_value();
    t.gradients = false;  // delta alone
    const AttentionTruth truth = shared_truth(o.truths, in, x, *recipe.target.input, t);
    emu::ForwardOptions fo;
    fo.threads = o.threads, fo.runs = o.runs;
    auto error_of_result = [&](const emu::ForwardResult& f, const emu::AttentionRecipe& r) {
        // An exact O cast is the run's O before its cast (the cast is its last step).
        if (*r.output.format == emu::f32)
            return error_stats(std::vector<double>(f.o_f32.begin(), f.o_f32.end()), truth.o).rel_rms;
        return error_stats(decoded(f.o, *r.output.format), truth.o).rel_rms;
    };
    // One run serves both settings of the O cast: runs are kept by the recipe's other settings.
    std::map<std::map<std::string, std::string>, emu::ForwardResult> runs;
    auto run_of = [&](const emu::AttentionRecipe& r) -> const emu::ForwardResult& {
        emu::AttentionRecipe low = r;
        low.output.format = recipe.output.format;
        const auto key = emu::recipe_settings(low);
        auto it = runs.find(key);
        if (it == runs.end()) it = runs.emplace(key, emu::flash_forward(low, sh, x, fo)).first;
        return it->second;
    };
    auto error_of = [&](const std::optional<emu::AttentionRecipe>& r) -> std::optional<double> {
        if (!r) return std::nullopt;
        return error_of_result(run_of(*r), *r);
    };
    AttributeResult result;
    result.recipe = recipe.name;
    const emu::ForwardResult& as_is = run_of(recipe);
    result.all_low = error_of_result(as_is, recipe);
    std::vector<const Stage*> listed;
    for (const Stage& stage : stages)
        if (stage.applies(recipe)) listed.push_back(&stage);
    result.all_exact = *error_of(with_exact(recipe, listed, std::vector<bool>(listed.size(), true)));
    for (std::size_t s = 0; s < (o.stages ? listed.size() : 0); ++s) {
        std::vector<bool> only_low(listed.size(), true), only_exact(listed.size(), false);
        only_low[s] = false, only_exact[s] = true;
        result.stages.push_back({listed[s]->name, error_of(with_exact(recipe, listed, only_low)),
                                 error_of(with_exact(recipe, listed, only_exact))});
    }
    if (in.d_o) {
        // delta from the recipe's O (a p-dp recipe is taken as forming it from the stored O)
        auto delta_error = [&](emu::DeltaKind kind) {
            emu::AttentionRecipe r = recipe;
            r.backward.delta = kind == emu::DeltaKind::p_dp ? emu::DeltaKind::stored_o : kind;
            if (kind == emu::DeltaKind::f32_o) r.backward.delta_format = &emu::f32;  // all of delta in float32
            const std::vector<float> delta = emu::delta_from_o(emu::flash_context(r, sh), x, as_is);
            return error_stats(std::vector<double>(delta.begin(), delta.end()), truth.delta).rel_rms;
        };
        result.delta_recipe = delta_error(recipe.backward.delta);
        result.delta_from_f32_o = delta_error(emu::DeltaKind::f32_o);
    }
    return result;
}

}  // namespace roundscope::analysis
