// Property: a kernel's raw answers written by gpu::write_kernel_dump (the GPU kit's goldens,
// `crosscheck --dump`) read back as the attention inputs and outputs they were: q, k, v the
// operands the kernel read, o and lse its own bits, the causal flag and the softmax scale (the
// double it was given); and a problem a dump's metadata cannot state is refused, not written
// without it.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <filesystem>
#include <string>

#include "analysis/synthetic_attention.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "gpu/flash_crosscheck.hpp"
#include "gpu/kernel_dump.hpp"
#include "lib/error.hpp"
#include "lib/safetensors.hpp"

using namespace roundscope;

namespace {

std::string temp_file(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("roundscope_" + std::to_string(getpid()) + "_" + name)).string();
}

}  // namespace

TEST_CASE("a kernel dump reads back as the operands and answers the kernel had", "[gpu-host][dump]") {
    analysis::SyntheticSpec spec;
    spec.scenario = analysis::Scenario::sink, spec.heads = 2, spec.n = 65, spec.d = 64, spec.seed = 5;
    const emu::AttentionInputs in = analysis::synthetic_attention(spec);
    const emu::AttentionRecipe recipe = emu::find_recipe("h100-bf16");
    const emu::AttentionShape shape = emu::attention_shape_of(in, true, 0);
    const emu::AttentionOperands operands = emu::attention_operands(in, *recipe.target.input, false);
    const gpu::FlashCrosscheck c = gpu::flash_crosscheck(recipe, shape, operands, false);
    REQUIRE(c.kernel == "hopper");
    const std::string path = temp_file("dump.safetensors");
    gpu::write_kernel_dump(path, recipe, shape, operands, c.gpu_forward, {{"device", c.device}});

    const TensorFile file = read_safetensors(path);
    std::filesystem::remove(path);
    const emu::AttentionInputs back = emu::find_attention_inputs(file);
    CHECK(back.causal == true);
    REQUIRE(back.softmax_scale);
    CHECK(*back.softmax_scale == shape.scale_given);
    CHECK(file.metadata.at("roundscope.recipe") == "h100-bf16");
    CHECK(file.metadata.at("roundscope.device") == c.device);
    const emu::AttentionOperands reread = emu::attention_operands(back, *recipe.target.input, false);
    CHECK(reread.q == operands.q);
    CHECK(reread.k == operands.k);
    CHECK(reread.v == operands.v);
    REQUIRE(back.o);
    REQUIRE(back.lse);
    for (std::uint64_t i = 0; i < back.o->size(); ++i) REQUIRE(back.o->bits_at(i) == c.gpu_forward.o[i]);
    for (std::uint64_t i = 0; i < back.lse->size(); ++i)
        REQUIRE(back.lse->bits_at(i) == std::bit_cast<std::uint32_t>(c.gpu_forward.lse[i]));
}

TEST_CASE("a kernel dump refuses what its metadata cannot state", "[gpu-host][dump]") {
    analysis::SyntheticSpec spec;
    spec.heads = 2, spec.n = 8, spec.d = 64;
    const emu::AttentionInputs in = analysis::synthetic_attention(spec);
    const emu::AttentionRecipe recipe = emu::find_recipe("h100-bf16");
    const emu::AttentionOperands operands = emu::attention_operands(in, *recipe.target.input, false);
    emu::ForwardResult out;
    out.o.assign(2 * 8 * 64, 0), out.lse.assign(2 * 8, 0.f);
    const std::string path = temp_file("refused.safetensors");
    emu::AttentionShape grouped = emu::attention_shape_of(in, false, 0);
    grouped.kv_group = 2;
    CHECK_THROWS_WITH(gpu::write_kernel_dump(path, recipe, grouped, operands, out, {}),
                      Catch::Contains("grouped heads"));
    emu::AttentionShape capped = emu::attention_shape_of(in, false, 0);
    capped.softcap = 30;
    CHECK_THROWS_WITH(gpu::write_kernel_dump(path, recipe, capped, operands, out, {}), Catch::Contains("soft cap"));
    emu::ForwardResult short_lse = out;
    short_lse.lse.pop_back();
    CHECK_THROWS_WITH(
        gpu::write_kernel_dump(path, recipe, emu::attention_shape_of(in, false, 0), operands, short_lse, {}),
        Catch::Contains("lse has 15 values"));
    CHECK_FALSE(std::filesystem::exists(path));
}
