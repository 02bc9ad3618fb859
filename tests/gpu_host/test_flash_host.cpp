// Property: the CUDA flash-attention kernels of gpu/, compiled for the simulated GPU (host
// threads, one per CUDA thread; mma.sync through emu's tensor-core model), give the emulator's
// bits for every output of the forward and backward pass: every preset the kernels run x four
// input scenarios x causal and not, with row and key counts that are not multiples of the tiles
// (136 rows on random inputs: two row tiles and three KV tiles; 72 on the others).
// What this proves on every machine: the kernels' tile loops, masks, barriers, shared-memory
// indexing, fragment layouts and host copies. What only a GPU proves: the tensor cores' bits
// (gpu_mma_equals_models) and the speed.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/synthetic_attention.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "gpu/host/simt_host.hpp"
#include "gpu/kernels/flash_attention.hpp"
#include "lib/bits.hpp"

using namespace roundscope;

namespace {

// The index of the first difference, or -1.
long first_difference(const std::vector<std::uint32_t>& want, const std::vector<std::uint32_t>& got) {
    if (want.size() != got.size()) return 0;
    for (std::size_t i = 0; i < want.size(); ++i)
        if (want[i] != got[i]) return static_cast<long>(i);
    return -1;
}

// The presets the kernels run (wgmma presets as mma.sync: the twins issue mma.sync only).
std::vector<emu::AttentionRecipe> kernel_presets() {
    std::vector<emu::AttentionRecipe> out;
    for (emu::AttentionRecipe recipe : emu::recipe_presets()) {
        if (recipe.target.instruction == "wgmma") emu::apply_setting(recipe, "instruction=mma.sync");
        if (gpu::flash_unsupported(recipe).empty()) out.push_back(recipe);
    }
    return out;
}

// Every recipe, causal and not, on one scenario of N rows: forward and backward equal the
// emulator. Returns the number of cases run.
int check_scenario(const std::vector<emu::AttentionRecipe>& recipes, analysis::Scenario scenario, std::uint64_t n) {
    int cases = 0;
    for (const emu::AttentionRecipe& recipe : recipes) {
        gpu::simt::set_simulated_architecture(recipe.target.arch);
        for (const bool causal : {false, true}) {
            analysis::SyntheticSpec spec;
            spec.scenario = scenario, spec.heads = 2, spec.n = n, spec.d = 32, spec.seed = 7;
            const emu::AttentionInputs inputs = analysis::synthetic_attention(spec);
            const emu::AttentionShape shape = emu::attention_shape_of(inputs, causal, 0);
            const emu::AttentionOperands in = emu::attention_operands(inputs, *recipe.target.input, true);
            INFO(recipe.name << ", scenario " << analysis::scenario_name(scenario) << (causal ? ", causal" : ""));
            const emu::ForwardResult want = emu::flash_forward(recipe, shape, in, 2);
            const emu::ForwardResult got = gpu::flash_forward(recipe, shape, in);
            CHECK(first_difference(want.o, got.o) == -1);
            CHECK(first_difference(float_bits(want.lse), float_bits(got.lse)) == -1);
            const emu::BackwardResult bw = emu::flash_backward(recipe, shape, in, want, 2);
            const emu::BackwardResult bg = gpu::flash_backward(recipe, shape, in, got);
            CHECK(first_difference(bw.dq, bg.dq) == -1);
            CHECK(first_difference(bw.dk, bg.dk) == -1);
            CHECK(first_difference(bw.dv, bg.dv) == -1);
            CHECK(first_difference(float_bits(bw.delta), float_bits(bg.delta)) == -1);
            ++cases;
        }
    }
    return cases;
}

// The first BF16 and the first FP8 preset the kernels run, with tile x tile blocks.
std::vector<emu::AttentionRecipe> two_presets(int tile) {
    std::vector<emu::AttentionRecipe> out;
    for (emu::AttentionRecipe recipe : kernel_presets()) {
        if ((recipe.target.input->bits == 16 && out.empty()) || (recipe.target.input->bits == 8 && out.size() == 1)) {
            emu::apply_setting(recipe, "block_m=" + std::to_string(tile));
            emu::apply_setting(recipe, "block_n=" + std::to_string(tile));
            out.push_back(recipe);
        }
    }
    return out;
}

// One BF16 and one FP8 preset with 32 x 32 tiles: what the sanitizer builds run in bounded
// time, crossing the barriers between tiles as often as the presets' larger tiles do.
std::vector<emu::AttentionRecipe> sanitized_presets() { return two_presets(32); }

}  // namespace

TEST_CASE("simulated GPU flash kernels: random inputs", "[gpu-host]") {
    REQUIRE(check_scenario(kernel_presets(), analysis::Scenario::random, 136) >= 10);
}

TEST_CASE("simulated GPU flash kernels: sink-dominated rows", "[gpu-host]") {
    REQUIRE(check_scenario(kernel_presets(), analysis::Scenario::sink, 72) >= 10);
}

TEST_CASE("simulated GPU flash kernels: repeated maxima", "[gpu-host]") {
    REQUIRE(check_scenario(kernel_presets(), analysis::Scenario::repeated_max, 72) >= 10);
}

TEST_CASE("simulated GPU flash kernels: scores spread over hundreds", "[gpu-host]") {
    REQUIRE(check_scenario(kernel_presets(), analysis::Scenario::wide, 72) >= 10);
}

// ThreadSanitizer and AddressSanitizer + UBSan builds run this one (tests/CMakeLists.txt): rows
// and keys over three tiles, the last one partial.
TEST_CASE("simulated GPU flash kernels: the sanitizers' set", "[gpu-host][sanitized]") {
    REQUIRE(sanitized_presets().size() == 2);
    REQUIRE(check_scenario(sanitized_presets(), analysis::Scenario::sink, 72) == 4);
}

// Row and key counts at a tile's edges (64 x 64 tiles): one row, one short of a tile, a whole
// tile, one over, for a BF16 and an FP8 preset.
TEST_CASE("simulated GPU flash kernels: N at the tile edges", "[gpu-host]") {
    const std::vector<emu::AttentionRecipe> recipes = two_presets(64);
    REQUIRE(recipes.size() == 2);
    for (const std::uint64_t n : {1, 63, 64, 65}) {
        INFO("N = " << n);
        REQUIRE(check_scenario(recipes, analysis::Scenario::random, n) == 4);
    }
}

// What the kernels do not take of an attention problem they refuse, saying what: a dense mask, a
// window or a top-left diagonal, grouped-query heads, a soft cap (the emulator runs them).
TEST_CASE("simulated GPU flash kernels refuse masks, grouped heads and soft caps, naming them", "[gpu-host]") {
    const emu::AttentionRecipe r = emu::find_recipe("fa2-bf16");
    emu::AttentionShape sh = emu::attention_shape(2, 16, 16, 16, true);
    const emu::AttentionOperands in = emu::random_operands(sh, *r.target.input, 1);
    emu::AttentionShape windowed = sh;
    emu::ScoreMask window;
    window.window_left = 4;
    windowed.mask = std::make_shared<const emu::ScoreMask>(window);
    CHECK_THROWS_WITH(gpu::flash_forward(r, windowed, in), Catch::Contains("window (4, -1)"));
    emu::AttentionShape top_left = sh;
    emu::ScoreMask diagonal;
    diagonal.alignment = emu::Alignment::top_left;
    top_left.mask = std::make_shared<const emu::ScoreMask>(diagonal);
    CHECK_THROWS_WITH(gpu::flash_forward(r, top_left, in), Catch::Contains("top-left causal"));
    emu::AttentionShape grouped = sh;
    grouped.kv_group = 2;
    CHECK_THROWS_WITH(gpu::flash_forward(r, grouped, emu::random_operands(grouped, *r.target.input, 1)),
                      Catch::Contains("grouped-query"));
    emu::AttentionShape capped = sh;
    capped.softcap = 30;
    CHECK_THROWS_WITH(gpu::flash_forward(r, capped, in), Catch::Contains("softcap"));
    const emu::ForwardResult f = emu::flash_forward(r, sh, in, 1);
    CHECK_THROWS_WITH(gpu::flash_backward(r, capped, in, f), Catch::Contains("softcap"));
}
