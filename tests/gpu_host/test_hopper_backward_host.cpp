// Property: the Hopper backward kernels (gpu/kernels/hopper/backward/: a delta pass; a dK/dV kernel
// per 128 keys walking the row blocks in order, S^T and dP^T by wgmma, P^T and dS^T from registers
// into dV and dK; a dQ kernel per 128 rows walking the key tiles in order, recomputing dS), run on
// the simulated GPU, give the emulator's backward of h100-bf16 bit for bit: dQ, dK, dV and delta,
// on every scenario (random, sink, repeated maxima, wide), causal and not, N in {1, 63, 64, 65,
// 1000}, D in {64, 128}, and with fewer queries than keys; with the recipe's choices the backward
// reads (exp2, exp2_arg). The comparison can fail: the kernels with exp2=ex2.approx against the
// emulator with the software exp2 differ, and dQ summed a key tile at a time (grad_schedule=torch-flash)
// differs from the in-order sum. Run twice they give
// the same bits (no atomics). Under ThreadSanitizer and ASan+UBSan (gpu_host_tsan, _asan) a case
// that reuses every ring stage.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/synthetic_attention.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "gpu/host/simt_host.hpp"
#include "gpu/kernels/hopper_flash_backward.hpp"
#include "lib/bits.hpp"
#include "tests/gpu_host/hopper_cases.hpp"

using namespace roundscope;

namespace {

using test::hopper::Case;
using test::hopper::differing;
using test::hopper::Problem;
using test::hopper::scenarios;

emu::AttentionRecipe recipe(const std::vector<std::string>& settings = {}) {
    return test::hopper::recipe("h100-bf16", settings);
}

Problem problem(const Case& c) { return test::hopper::problem(c, emu::bf16, true, 13); }

// The kernels run with `kernel_recipe` against the emulator run with `emulator_recipe`, both from
// the emulator's forward of the emulator's recipe: the number of differing elements of dQ, dK,
// dV and delta.
std::size_t differences(const Case& c, const emu::AttentionRecipe& kernel_recipe,
                        const emu::AttentionRecipe& emulator_recipe) {
    const Problem p = problem(c);
    const emu::ForwardResult fwd = emu::flash_forward(emulator_recipe, p.shape, p.in, 2);
    const emu::BackwardResult want = emu::flash_backward(emulator_recipe, p.shape, p.in, fwd, 2);
    const emu::BackwardResult got = gpu::hopper_flash_backward(kernel_recipe, p.shape, p.in, fwd);
    return differing(want.dq, got.dq) + differing(want.dk, got.dk) + differing(want.dv, got.dv) +
           differing(float_bits(want.delta), float_bits(got.delta));
}

}  // namespace

TEST_CASE("the Hopper backward equals h100-bf16's at the tile edges: N = 1, 63, 64, 65",
          "[gpu-host][hopper][hopper-backward]") {
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

// [.][slow]: the full suite's (ctest test_gpu_host_slow), not the fast loop's.
TEST_CASE("the Hopper backward equals h100-bf16's over many tiles: N = 1000",
          "[.][slow][gpu-host][hopper-backward][n1000]") {
    gpu::simt::set_simulated_architecture("sm90");
    const emu::AttentionRecipe r = recipe();
    for (const analysis::Scenario s : scenarios)
        for (const std::uint64_t d : {64, 128})
            for (const bool causal : {false, true}) {
                INFO(analysis::scenario_name(s) << " D " << d << (causal ? " causal" : ""));
                CHECK(differences({s, 1, 1000, d, causal}, r, r) == 0);
            }
}

// Bottom-right causal with fewer queries: row blocks whose first rows see no key of a tile its
// last rows see, and key blocks no row sees (dK = dV = 0).
TEST_CASE("the Hopper backward with fewer queries than keys: N_q = 300 and 998 of N_kv = 1000",
          "[.][slow][gpu-host][hopper-backward][n1000]") {
    gpu::simt::set_simulated_architecture("sm90");
    for (const std::uint64_t n_q : {300, 998})
        for (const bool causal : {false, true}) {
            INFO("N_q " << n_q << (causal ? " causal" : ""));
            CHECK(differences({analysis::Scenario::random, 1, 1000, 64, causal, n_q}, recipe(), recipe()) == 0);
        }
}

TEST_CASE("the Hopper backward takes the recipe's exp2 and its argument - the check can fail",
          "[gpu-host][hopper-backward]") {
    gpu::simt::set_simulated_architecture("sm90");
    // wide scores: P's last bits reach dS's BF16 cast (on random scores at N 200 exp2's do not)
    const Case c{analysis::Scenario::wide, 1, 200, 64, true};
    const emu::AttentionRecipe approx = recipe({"exp2=ex2.approx.ftz"}), mul_sub = recipe({"exp2_arg=mul-sub"});
    CHECK(differences(c, approx, approx) == 0);
    CHECK(differences(c, mul_sub, mul_sub) == 0);
    CHECK(differences(c, recipe(), approx) > 0);  // negative controls
    CHECK(differences(c, recipe(), mul_sub) > 0);
    // dQ summed per key tile from zero, then added (FlashAttention's atomics, in order): not this order
    const Case tiles{analysis::Scenario::random, 1, 300, 64, false};
    CHECK(differences(tiles, recipe(), recipe({"grad_schedule=torch-flash"})) > 0);
}

TEST_CASE("the Hopper backward gives the same bits run after run (no atomics)", "[gpu-host][hopper-backward]") {
    gpu::simt::set_simulated_architecture("sm90");
    const Problem p = problem({analysis::Scenario::sink, 2, 260, 128, false});
    const emu::ForwardResult fwd = emu::flash_forward(recipe(), p.shape, p.in, 2);
    const emu::BackwardResult a = gpu::hopper_flash_backward(recipe(), p.shape, p.in, fwd);
    const emu::BackwardResult b = gpu::hopper_flash_backward(recipe(), p.shape, p.in, fwd);
    CHECK(differing(a.dq, b.dq) == 0);
    CHECK(differing(a.dk, b.dk) == 0);
    CHECK(differing(a.dv, b.dv) == 0);
}

TEST_CASE("the Hopper backward refuses what it does not run, saying why", "[gpu-host][hopper-backward]") {
    gpu::simt::set_simulated_architecture("sm90");
    const Problem p = problem({analysis::Scenario::random, 1, 8, 64, false});
    CHECK(gpu::hopper_flash_backward_unsupported(recipe(), p.shape).empty());
    CHECK(gpu::hopper_flash_backward_unsupported(recipe({"grad_schedule=torch-flash"}), p.shape) ==
          "grad_schedule=torch-flash: the Hopper backward walks its tiles in order (no atomics: deterministic) "
          "(grad_schedule runs in-order)");
    CHECK(gpu::hopper_flash_backward_unsupported(recipe({"ds_format=f16"}), p.shape).find("BF16") != std::string::npos);
    CHECK(gpu::hopper_flash_backward_unsupported(recipe({"delta=p-dp"}), p.shape).find("stored O") !=
          std::string::npos);
    CHECK(gpu::hopper_flash_backward_unsupported(emu::find_recipe("h100-fp8"), p.shape).find("FP8") !=
          std::string::npos);
    emu::AttentionShape wide = p.shape;
    wide.d = wide.d_v = 96;
    CHECK(gpu::hopper_flash_backward_unsupported(recipe(), wide).find("64 or 128") != std::string::npos);
    const emu::ForwardResult fwd = emu::flash_forward(recipe(), p.shape, p.in, 1);
    emu::AttentionOperands no_grad = p.in;
    no_grad.d_o.clear();
    CHECK_THROWS_WITH(gpu::hopper_flash_backward(recipe(), p.shape, no_grad, fwd), Catch::Contains("'do'"));
    emu::ForwardResult short_fwd = fwd;
    short_fwd.lse_log2.pop_back();
    CHECK_THROWS_WITH(gpu::hopper_flash_backward(recipe(), p.shape, p.in, short_fwd), Catch::Contains("LSE"));
    gpu::simt::set_simulated_architecture("sm80");
    CHECK(gpu::hopper_flash_backward_unsupported(recipe(), p.shape).find("sm_90") != std::string::npos);
    gpu::simt::set_simulated_architecture("sm90");
}

// ThreadSanitizer and AddressSanitizer + UBSan run this one: three row blocks and three key tiles,
// so that each ring stage is reused, causal, and rows and keys past the end of the last block.
TEST_CASE("the Hopper backward: the sanitizers' case", "[gpu-host][hopper-backward][sanitized]") {
    gpu::simt::set_simulated_architecture("sm90");
    CHECK(differences({analysis::Scenario::sink, 1, 300, 64, true}, recipe(), recipe()) == 0);
}
