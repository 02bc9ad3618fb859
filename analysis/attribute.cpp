#include "analysis/attribute.hpp"

#include <array>

#include "analysis/attention_run.hpp"
#include "analysis/truth/attention_truth.hpp"
#include "emu/attention/attention_operands.hpp"
#include "emu/attention/flash_attention.hpp"
#include "emu/attention/flash_context.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/numbers/unpack.hpp"

namespace roundscope::analysis {
namespace {

enum Stage { score_product, p_cast, pv_product, o_cast, stage_count };
constexpr std::array<const char*, stage_count> stage_names{"score product", "P cast", "P V product", "O cast"};

// The recipe with the stages in `exact` made exact; empty where the combination has no kernel.
std::optional<emu::AttentionRecipe> with_exact(emu::AttentionRecipe r, const std::array<bool, stage_count>& exact) {
    if (exact[score_product]) r.score_product = emu::Product::f64;
    if (exact[p_cast]) {
        if (!exact[pv_product]) return std::nullopt;  // no tensor core takes float32 P
        r.p_format = &emu::f32, r.p_scale = 1;
    }
    if (exact[pv_product]) r.pv_product = emu::Product::f64;
    if (exact[o_cast]) r.o_format = &emu::f32;
    return r;
}

}  // namespace

AttributeResult attribute(const emu::AttentionInputs& in, const AttributeOptions& o) {
    const emu::AttentionRecipe& recipe = o.recipe;
    const emu::AttentionShape sh = emu::attention_shape_of(in, o.causal, o.softmax_scale);
    const emu::AttentionOperands x = emu::attention_operands(in, *recipe.input, in.d_o.has_value());
    TruthOptions t;
    t.causal = o.causal, t.scale = sh.scale, t.threads = o.threads, t.backward = in.d_o.has_value();
    const AttentionTruth truth = attention_truth(inputs_as_held(in, x, *recipe.input), t);
    emu::ForwardOptions fo;
    fo.threads = o.threads;
    auto error_of_result = [&](const emu::ForwardResult& f, const emu::AttentionRecipe& r) {
        return error_stats(decoded(f.o, *r.o_format), truth.o).rel_rms;
    };
    auto error_of = [&](const std::optional<emu::AttentionRecipe>& r) -> std::optional<double> {
        if (!r) return std::nullopt;
        return error_of_result(emu::flash_forward(*r, sh, x, fo), *r);
    };
    AttributeResult result;
    result.recipe = recipe.name;
    const emu::ForwardResult as_is = emu::flash_forward(recipe, sh, x, fo);
    result.all_low = error_of_result(as_is, recipe);
    result.all_exact = *error_of(with_exact(recipe, {true, true, true, true}));
    for (int s = 0; s < stage_count; ++s) {
        std::array<bool, stage_count> only_low{true, true, true, true}, only_exact{};
        only_low[static_cast<std::size_t>(s)] = false;
        only_exact[static_cast<std::size_t>(s)] = true;
        result.stages.push_back({stage_names[static_cast<std::size_t>(s)], error_of(with_exact(recipe, only_low)),
                                 error_of(with_exact(recipe, only_exact))});
    }
    if (in.d_o) {
        // delta from the recipe's O (a p-dp recipe is taken as forming it from the stored O)
        auto delta_error = [&](emu::DeltaKind kind) {
            emu::AttentionRecipe r = recipe;
            r.delta = kind == emu::DeltaKind::p_dp ? emu::DeltaKind::stored_o : kind;
            if (kind == emu::DeltaKind::f32_o) r.delta_format = &emu::f32;  // all of delta in float32
            const std::vector<float> delta = emu::delta_from_o(emu::flash_context(r, sh), x, as_is);
            return error_stats(std::vector<double>(delta.begin(), delta.end()), truth.delta).rel_rms;
        };
        result.delta_recipe = delta_error(recipe.delta);
        result.delta_from_f32_o = delta_error(emu::DeltaKind::f32_o);
    }
    return result;
}

}  // namespace roundscope::analysis
