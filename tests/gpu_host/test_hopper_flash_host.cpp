// Property: the Hopper forward kernel (gpu/kernels/hopper_flash_kernel.cuh: a producer warp's TMA loads
// into a two-stage K/V ring under mbarriers, two consumer warpgroups' wgmmas, the online softmax
// on accumulator fragments, a TMA-stored epilogue), run on the simulated GPU, gives the
// emulator's bits for h100-bf16: O, O before its cast, and the LSE, on every scenario (random,
// sink, repeated maxima, wide), causal and not, N in {1, 63, 64, 65, 1000}, D in {64, 128}; and
// with the recipe's choices it takes (exp2=ex2.approx, exp2_arg=mul-sub, rescale_arg=scaled,
// the forward KV order). The comparison can fail: the kernel run with exp2_arg=fma differs from
// the emulator run with mul-sub. Under
// ThreadSanitizer (gpu_host_tsan) a small case: a missing wait on the ring would be a race.
// What only a GPU proves: wgmma's layouts and bits on the hardware, and the speed.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/synthetic_attention.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "gpu/host/simt_host.hpp"
#include "gpu/kernels/hopper_flash.hpp"
#include "lib/bits.hpp"
#include "tests/emu/attention/negative_zero_tile.hpp"
#include "tests/gpu_host/hopper_cases.hpp"

using namespace roundscope;

namespace {

using test::hopper::Case;
using test::hopper::differing;
using test::hopper::scenarios;

emu::AttentionRecipe recipe(const std::vector<std::string>& settings = {}) {
    return test::hopper::recipe("h100-bf16", settings);
}

test::hopper::Problem problem(const Case& c) { return test::hopper::problem(c, emu::bf16, false, 11); }

// The kernel run with `kernel_recipe` against the emulator run with `emulator_recipe`: the
// number of differing elements of O, O in float32 and the LSE.
std::size_t differences(const Case& c, const emu::AttentionRecipe& kernel_recipe,
                        const emu::AttentionRecipe& emulator_recipe) {
    const test::hopper::Problem p = problem(c);
    const emu::ForwardResult want = emu::flash_forward(emulator_recipe, p.shape, p.in, 2);
    const emu::ForwardResult got = gpu::hopper_flash_forward(kernel_recipe, p.shape, p.in);
    return differing(want.o, got.o) + differing(float_bits(want.o_f32), float_bits(got.o_f32)) +
           differing(float_bits(want.lse), float_bits(got.lse)) +
           differing(float_bits(want.lse_log2), float_bits(got.lse_log2));
}

}  // namespace

TEST_CASE("the Hopper kernel equals h100-bf16 at the tile edges: N = 1, 63, 64, 65", "[gpu-host][hopper][edges]") {
    gpu::simt::set_simulated_architecture("sm90");
    const emu::AttentionRecipe r = recipe();
    for (const analysis::Scenario s : scenarios)
        for (const std::uint64_t n : {1, 63, 64, 65})
            for (const std::uint64_t d : {64, 128})
                for (const bool causal : {false, true}) {
                    INFO(analysis::scenario_name(s) << " N " << n << " D " << d << (causal ? " causal" : ""));
                    CHECK(differences({s, 2, n, d, causal}, r, r) == 0);
                }
}

// [.][slow]: half a minute of the full suite (ctest test_gpu_host_slow), not the fast loop.
TEST_CASE("the Hopper kernel equals h100-bf16 over many tiles: N = 1000", "[.][slow][gpu-host][hopper][n1000]") {
    gpu::simt::set_simulated_architecture("sm90");
    const emu::AttentionRecipe r = recipe();
    for (const analysis::Scenario s : scenarios)
        for (const std::uint64_t d : {64, 128})
            for (const bool causal : {false, true}) {
                INFO(analysis::scenario_name(s) << " D " << d << (causal ? " causal" : ""));
                CHECK(differences({s, 1, 1000, d, causal}, r, r) == 0);
            }
}

// The tiles every row of a block sees whole run without the mask, in a loop of their own: where
// the query rows end 126 or 2 keys short of the keys (bottom-right), a block's first row misses
// the last keys of tiles its other rows see whole.
TEST_CASE("the Hopper kernel with fewer queries than keys: N_q = 874 and 998 of N_kv = 1000",
          "[.][slow][gpu-host][hopper][n1000]") {
    gpu::simt::set_simulated_architecture("sm90");
    for (const bool forward : {false, true}) {
        const emu::AttentionRecipe r = forward ? recipe({"kv_order=forward"}) : recipe();
        for (const std::uint64_t n_q : {874, 998})
            for (const bool causal : {false, true}) {
                INFO("N_q " << n_q << (causal ? " causal" : "") << (forward ? " forward" : " reverse"));
                CHECK(differences({analysis::Scenario::random, 1, 1000, 64, causal, n_q}, r, r) == 0);
            }
    }
}

TEST_CASE("the Hopper kernel takes the recipe's exp2, its argument, the rescale and the KV order - the check can fail",
          "[gpu-host][hopper]") {
    gpu::simt::set_simulated_architecture("sm90");
    const Case c{analysis::Scenario::random, 2, 300, 64, true};
    const emu::AttentionRecipe mul_sub = recipe({"exp2_arg=mul-sub"}), forward = recipe({"kv_order=forward"});
    const emu::AttentionRecipe approx = recipe({"exp2=ex2.approx"}), scaled = recipe({"rescale_arg=scaled"});
    CHECK(differences(c, mul_sub, mul_sub) == 0);
    CHECK(differences(c, forward, forward) == 0);
    CHECK(differences(c, approx, approx) == 0);
    CHECK(differences(c, scaled, scaled) == 0);
    CHECK(differences(c, recipe(), approx) > 0);
    CHECK(differences(c, recipe(), mul_sub) > 0);  // the negative control
    CHECK(differences(c, recipe(), forward) > 0);
}

TEST_CASE("the Hopper kernel on a partial tile built to reach -0 (P V over all 8 steps of the tile)",
          "[gpu-host][hopper]") {
    gpu::simt::set_simulated_architecture("sm90");
    const emu::AttentionShape shape = test::negative_zero_shape();
    const emu::AttentionOperands in = test::negative_zero_operands();
    const emu::ForwardResult got = gpu::hopper_flash_forward(recipe(), shape, in);
    const emu::ForwardResult want = emu::flash_forward(recipe(), shape, in, 1);
    CHECK(differing(want.o, got.o) == 0);
    CHECK(differing(float_bits(want.o_f32), float_bits(got.o_f32)) == 0);
    CHECK(differing(float_bits(want.lse), float_bits(got.lse)) == 0);
}

TEST_CASE("the Hopper kernel refuses what it does not run, saying why", "[gpu-host][hopper]") {
    gpu::simt::set_simulated_architecture("sm90");
    const emu::AttentionShape shape = problem({analysis::Scenario::random, 1, 8, 64, false}).shape;
    CHECK(gpu::hopper_flash_unsupported(recipe(), shape).empty());
    // fa2-bf16's first setting the kernel does not run, in the order of the keys' names.
    CHECK(gpu::hopper_flash_unsupported(emu::find_recipe("fa2-bf16"), shape) ==
          "block_n=64: the Hopper kernel's tiles are 128 x 128 (block_n runs 128)");
    CHECK(gpu::hopper_flash_unsupported(recipe({"instruction=mma.sync"}), shape).find("wgmma") != std::string::npos);
    CHECK(gpu::hopper_flash_unsupported(recipe({"block_n=64"}), shape).find("128 x 128") != std::string::npos);
    CHECK(gpu::hopper_flash_unsupported(recipe({"pv_depth=keys"}), shape).find("pv_depth") != std::string::npos);
    emu::AttentionShape wide = shape;
    wide.d = wide.d_v = 96;
    CHECK(gpu::hopper_flash_unsupported(recipe(), wide).find("64 or 128") != std::string::npos);
    gpu::simt::set_simulated_architecture("sm80");
    CHECK(gpu::hopper_flash_unsupported(recipe(), shape).find("sm_90") != std::string::npos);
    gpu::simt::set_simulated_architecture("sm90");
}

// ThreadSanitizer and AddressSanitizer + UBSan run this one: three KV tiles, so that each ring
// stage is reused, causal, and rows past the end of the last block.
TEST_CASE("the Hopper kernel: the sanitizers' case", "[gpu-host][hopper][sanitized]") {
    gpu::simt::set_simulated_architecture("sm90");
    CHECK(differences({analysis::Scenario::sink, 1, 300, 64, true}, recipe(), recipe()) == 0);
}
