// Error attribution (analysis/attribute.hpp) names the stage that matters: with every stage
// exact the error is float32's; for fa3-fp8 the E4M3 P cast alone gives nearly all of it; for
// fa2-bf16 the P and O casts each carry a BF16-sized share and the tensor-core score product
// almost none; combinations no kernel can run are reported as such; the PyTorch recipe's BF16
// softmax and running O are stages of their own.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "analysis/attribute.hpp"
#include "analysis/synthetic_attention.hpp"

using namespace roundscope;
using namespace roundscope::analysis;

TEST_CASE("Attribution puts the error on the casts, and on the P cast for FP8", "[attribute]") {
    SyntheticSpec spec;
    spec.n = 192, spec.d = 64, spec.seed = 4;
    const emu::AttentionInputs in = synthetic_attention(spec);
    AttributeOptions o;
    o.recipe = emu::find_recipe("fa3-fp8");
    const AttributeResult fp8 = attribute(in, o);
    REQUIRE(fp8.stages.size() == 4);
    CHECK(fp8.all_exact < 1e-6);
    CHECK(fp8.stages[1].stage == "P cast");
    CHECK(*fp8.stages[1].only_this_low > 0.9 * fp8.all_low);  // the P cast alone: nearly all
    CHECK(*fp8.stages[0].only_this_low < 0.05 * fp8.all_low);
    CHECK_FALSE(fp8.stages[1].only_this_exact.has_value());  // float32 P on a tensor core: no kernel
    CHECK_FALSE(fp8.stages[2].only_this_low.has_value());

    o.recipe = emu::find_recipe("fa2-bf16");
    const AttributeResult bf16 = attribute(in, o);
    CHECK(bf16.all_exact < 1e-6);
    CHECK(*bf16.stages[0].only_this_low < 1e-5);  // the score product: float32-sized
    CHECK(*bf16.stages[1].only_this_low > 1e-4);  // the P cast: BF16-sized
    CHECK(*bf16.stages[3].only_this_low > 1e-4);  // the O cast: BF16-sized
    CHECK(*bf16.stages[3].only_this_exact < bf16.all_low);
    REQUIRE(bf16.delta_recipe.has_value());
    CHECK(*bf16.delta_from_f32_o < *bf16.delta_recipe);
}

TEST_CASE("Attribution of the PyTorch recipe lists its BF16 softmax and running O, and all exact is float32's",
          "[attribute]") {
    SyntheticSpec spec;
    spec.n = 192, spec.d = 64, spec.seed = 4;
    AttributeOptions o;
    o.recipe = emu::find_recipe("fa2-bf16-torch");
    const AttributeResult torch = attribute(synthetic_attention(spec), o);
    std::vector<std::string> names;
    for (const StageAttribution& s : torch.stages) names.push_back(s.stage);
    CHECK(names == std::vector<std::string>{"score product", "softmax format", "row sum format", "P cast",
                                            "P V product", "running O", "O cast"});
    CHECK(torch.all_exact < 1e-6);  // every BF16 rounding of the recipe is a listed stage
    CHECK(torch.all_low > 1e-3);
    CHECK(*torch.stages[1].only_this_low > 1e-3);             // BF16 S and max alone: BF16-sized
    CHECK(*torch.stages[1].only_this_exact < torch.all_low);  // and without them, less error
    CHECK(*torch.stages[2].only_this_low > 1e-4);             // the BF16 row sum alone
    CHECK(*torch.stages[2].only_this_exact < torch.all_low);
    CHECK(*torch.stages[5].only_this_low > 1e-4);  // the BF16 running O alone
    // the online softmax keeps l in float32: no row sum stage
    o.recipe = emu::find_recipe("fa2-bf16");
    for (const StageAttribution& s : attribute(synthetic_attention(spec), o).stages) CHECK(s.stage != "row sum format");
}
