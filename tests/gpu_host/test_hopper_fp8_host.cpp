// Property: the FP8 Hopper forward kernel (gpu/kernels/hopper_fp8_flash_kernel.cuh: the BF16
// kernel's producer, ring and pipelined walk with E4M3 wgmma, V^T's permuted 32-key panels, the
// softmax with the max offset and row_sum=lane-tile, FlashAttention-3's epilogue), run on the
// simulated GPU, gives the emulator's bits for h100-fp8: O, O before its cast, and the LSE, on
// every scenario (random, sink, repeated maxima, wide), causal and not, N in {1, 63, 64, 65,
// 1000}, D in {64, 128}; and with the recipe's choices it takes (exp2_arg, rescale_arg, max_offset,
// the KV order). The comparison can fail: the kernel against the emulator run with another exp2,
// exp2 argument, max offset, row sum or order differs. Under ThreadSanitizer and
// AddressSanitizer a small case. What only a GPU proves: E4M3 wgmma's layouts and bits (the
// layout probe's E4M3 cases in the device check) and the speed.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/synthetic_attention.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/numbers/cast_options.hpp"
#include "gpu/host/simt_host.hpp"
#include "gpu/kernels/hopper/fp8/config.cuh"
#include "gpu/kernels/hopper_flash.hpp"
#include "gpu/primitives/convert.hpp"
#include "lib/bits.hpp"
#include "tests/gpu_host/hopper_cases.hpp"

using namespace roundscope;

namespace {

using test::hopper::Case;
using test::hopper::differing;
using test::hopper::scenarios;

emu::AttentionRecipe recipe(const std::vector<std::string>& settings = {}) {
    return test::hopper::recipe("h100-fp8", settings);
}

test::hopper::Problem problem(const Case& c) { return test::hopper::problem(c, emu::e4m3, false, 11); }

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

TEST_CASE("V^T's key permutation makes S's registers the FP8 A fragment, and is one", "[gpu-host][hopper-fp8]") {
    // A fragment: register r (r / 2 = h) byte b of lane t holds k position 16 h + 4 (t % 4) + b;
    // S's accumulator: s[4 j + e] holds key 8 j + 2 (t % 4) + e % 2. rescale_and_cast packs s at
    // j = 2 h + b / 2 (of the step), e % 2 = b % 2 into that byte.
    std::vector<int> seen(32, 0);
    for (int h = 0; h < 2; ++h)
        for (int t = 0; t < 4; ++t)
            for (int b = 0; b < 4; ++b) {
                const int k = 16 * h + 4 * t + b, j = 2 * h + b / 2;
                CHECK(gpu::hopper::fp8::permuted_key(k) == 8 * j + 2 * t + b % 2);
                ++seen[static_cast<std::size_t>(gpu::hopper::fp8::permuted_key(k))];
            }
    for (const int s : seen) CHECK(s == 1);
}

TEST_CASE("the FP8 cast of P, four at a time, is the emulator's cast of P on every input", "[gpu-host][hopper-fp8]") {
    // on the simulated GPU e4m3x4_rn_satfinite is steps::saturating_cast; the GPU's cvt is the
    // CUDA convention's cast (its digests in tests/data/golden/h100/probe), the same options
    const emu::CastOptions cuda = emu::convention_options(emu::Convention::cuda, emu::e4m3);
    CHECK(cuda.saturate);
    CHECK(cuda.mode == emu::RoundingMode::nearest_even);
    CHECK(!cuda.flush_input);
    CHECK(!cuda.flush_output);
    CHECK(cuda.nan_sign == emu::NanSign::positive);
    CHECK(cuda.nan_payload == emu::NanPayload::all_ones);
    const float x[] = {0.0f, -0.0f, 1.0f, 448.0f, 464.0f, -1e30f, 0x1p-10f, 0x1.1p-9f, __builtin_nanf(""), 255.9f};
    for (const float a : x)
        for (const float b : x) {
            const std::uint32_t four = gpu::e4m3x4_rn_satfinite(a, b, b, a);
            const auto want = [](float v) {
                return static_cast<std::uint32_t>(
                    emu::cast_from_f32(v, emu::e4m3, emu::convention_options(emu::Convention::cuda, emu::e4m3)));
            };
            CHECK(four == (want(a) | want(b) << 8 | want(b) << 16 | want(a) << 24));
        }
}

TEST_CASE("the FP8 Hopper kernel equals h100-fp8 at the tile edges: N = 1, 63, 64, 65",
          "[gpu-host][hopper-fp8][edges]") {
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
TEST_CASE("the FP8 Hopper kernel equals h100-fp8 over many tiles: N = 1000", "[.][slow][gpu-host][hopper-fp8][n1000]") {
    gpu::simt::set_simulated_architecture("sm90");
    const emu::AttentionRecipe r = recipe();
    for (const analysis::Scenario s : scenarios)
        for (const std::uint64_t d : {64, 128})
            for (const bool causal : {false, true}) {
                INFO(analysis::scenario_name(s) << " D " << d << (causal ? " causal" : ""));
                CHECK(differences({s, 1, 1000, d, causal}, r, r) == 0);
            }
}

// Whole tiles without the mask, in a loop of their own: where the queries end 222 or 2 keys short
// of the keys (bottom-right), a block's first row misses the last keys of tiles its other rows see.
TEST_CASE("the FP8 Hopper kernel with fewer queries than keys: N_q = 778 and 998 of N_kv = 1000",
          "[.][slow][gpu-host][hopper-fp8][n1000]") {
    gpu::simt::set_simulated_architecture("sm90");
    for (const bool forward : {false, true}) {
        const emu::AttentionRecipe r = forward ? recipe({"kv_order=forward"}) : recipe();
        for (const std::uint64_t n_q : {778, 998})
            for (const bool causal : {false, true}) {
                INFO("N_q " << n_q << (causal ? " causal" : "") << (forward ? " forward" : " reverse"));
                CHECK(differences({analysis::Scenario::random, 1, 1000, 128, causal, n_q}, r, r) == 0);
            }
    }
}

TEST_CASE("the FP8 Hopper kernel takes the recipe's choices - the check can fail", "[gpu-host][hopper-fp8]") {
    gpu::simt::set_simulated_architecture("sm90");
    const Case c{analysis::Scenario::sink, 2, 300, 64, true};
    const std::vector<std::vector<std::string>> choices = {
        {"exp2_arg=mul-sub"}, {"kv_order=forward"}, {"rescale_arg=scaled"}, {"max_offset=0"}};
    for (const auto& choice : choices) {
        INFO(choice.front());
        const emu::AttentionRecipe chosen = recipe(choice);
        CHECK(differences(c, chosen, chosen) == 0);
        CHECK(differences(c, recipe(), chosen) > 0);  // the negative control: each choice shows
    }
    CHECK(differences(c, recipe(), recipe({"row_sum=quad-ffma"})) > 0);
    CHECK(differences(c, recipe(), recipe({"exp2=software"})) > 0);
}

TEST_CASE("the FP8 Hopper kernel refuses what it does not run, saying why", "[gpu-host][hopper-fp8]") {
    gpu::simt::set_simulated_architecture("sm90");
    const emu::AttentionShape shape = problem({analysis::Scenario::random, 1, 8, 64, false}).shape;
    CHECK(gpu::hopper_flash_unsupported(recipe(), shape).empty());
    CHECK(gpu::hopper_flash_unsupported(recipe({"block_n=128"}), shape).find("fa3-fp8") != std::string::npos);
    CHECK(gpu::hopper_flash_unsupported(recipe({"row_sum=quad-ffma"}), shape).find("lane-tile") != std::string::npos);
    CHECK(gpu::hopper_flash_unsupported(recipe({"p_format=e5m2"}), shape).find("E4M3 P") != std::string::npos);
    CHECK(gpu::hopper_flash_unsupported(recipe({"epilogue=fa2"}), shape).find("fa3") != std::string::npos);
    CHECK(gpu::hopper_flash_unsupported(recipe({"exp2=software"}), shape).find("ex2.approx.ftz") != std::string::npos);
    CHECK(gpu::hopper_flash_unsupported(emu::find_recipe("fa3-fp8"), shape).find("FP8 Hopper kernel") !=
          std::string::npos);
    emu::AttentionShape wide = shape;
    wide.d = wide.d_v = 96;
    CHECK(gpu::hopper_flash_unsupported(recipe(), wide).find("64 or 128") != std::string::npos);
    gpu::simt::set_simulated_architecture("sm80");
    CHECK(gpu::hopper_flash_unsupported(recipe(), shape).find("sm_90") != std::string::npos);
    gpu::simt::set_simulated_architecture("sm90");
}

// ThreadSanitizer and AddressSanitizer + UBSan run this one: three KV tiles at D = 128 (each
// ring stage reused), causal, a partial 32-key panel, and rows past the end of the last block.
TEST_CASE("the FP8 Hopper kernel: the sanitizers' case", "[gpu-host][hopper-fp8][sanitized]") {
    gpu::simt::set_simulated_architecture("sm90");
    CHECK(differences({analysis::Scenario::sink, 1, 600, 128, true}, recipe(), recipe()) == 0);
}
