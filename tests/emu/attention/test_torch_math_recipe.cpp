// The recipe torch-math-sm90 (PyTorch's math SDPA on a GPU, read from attention.cpp and ATen's
// softmax_warp_forward and checked on the H100 captures, docs/gpu.md): a row against the formulas
// written out here (q and k scaled by the root of the scale, FFMA chains, 32 lanes, libdevice's
// expf, the butterfly); the root taken from the caller's double; an empty row; each choice
// changes bits; what it refuses.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/math_path_operands.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/math/libdevice_math.hpp"
#include "emu/numbers/round.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"
#include "tests/emu/attention/recipe_test_helpers.hpp"

using namespace roundscope;
using namespace roundscope::emu;
namespace a = roundscope::emu::f32_arith;

using test::with;

TEST_CASE("torch-math-sm90: q and k times the root of the scale, FFMA chains, 32 lanes and libdevice's expf",
          "[flash][torch-math]") {
    const AttentionRecipe r = find_recipe("torch-math-sm90");
    // 40 keys: lanes 0 to 7 hold two (key j and j + 32), the others one; D 3: the root is inexact
    const std::uint64_t n_q = 3, n_kv = 40, d = 3;
    const AttentionShape sh{1, n_q, n_kv, d, d, false, static_cast<float>(1 / std::sqrt(3.0))};
    const AttentionOperands in = random_operands(sh, bf16, 51, 2.5);
    const ForwardResult got = flash_forward(r, sh, in);
    const auto value = [](std::uint32_t bits) { return static_cast<float>(decode(bf16, bits)); };
    const float root = static_cast<float>(std::sqrt(1 / std::sqrt(3.0)));
    for (std::uint64_t i = 0; i < n_q; ++i) {
        std::vector<float> s(n_kv), e(n_kv);
        for (std::uint64_t j = 0; j < n_kv; ++j) {
            float acc = 0;
            for (std::uint64_t c = 0; c < d; ++c)
                acc = a::fma(a::mul(value(in.q[i * d + c]), root), a::mul(value(in.k[j * d + c]), root), acc);
            s[j] = acc;
        }
        float m = s[0];
        for (const float x : s) m = std::fmax(m, x);
        std::array<float, 32> lane{};
        for (std::uint64_t j = 0; j < n_kv; ++j) {
            e[j] = libdevice_expf(a::sub(s[j], m));
            lane[j % 32] = a::add(lane[j % 32], e[j]);
        }
        for (int offset = 16; offset > 0; offset /= 2) {
            std::array<float, 32> next{};
            for (int l = 0; l < 32; ++l) next[l] = a::add(lane[l], lane[l ^ offset]);
            lane = next;
        }
        for (std::uint64_t c = 0; c < d; ++c) {
            float o = 0;
            for (std::uint64_t j = 0; j < n_kv; ++j) o = a::fma(a::div(e[j], lane[0]), value(in.v[j * d + c]), o);
            INFO("row " << i << ", feature " << c);
            CHECK(got.o[i * d + c] == bf16_saturating_rne(o));
            CHECK(bits_of(got.o_f32[i * d + c]) == bits_of(o));
        }
        CHECK(bits_of(got.lse[i]) == bits_of(a::add(m, libdevice_logf(lane[0]))));
    }
}

TEST_CASE("torch-math-sm90: the root of the scale as the caller gave it, and an empty row", "[flash][torch-math]") {
    // D 96: sqrt(1/sqrt(96)) and the root of its float32 rounding round apart
    AttentionShape sh = test::square_shape(1, 4, 96);
    const auto by_d = static_cast<float>(std::sqrt(1 / std::sqrt(96.0)));
    CHECK(by_d != static_cast<float>(std::sqrt(static_cast<double>(sh.scale))));
    CHECK(detail::math_path_root_scale(sh) == by_d);  // 1/sqrt(d), the default scale, rounds to it
    sh.scale = 0.1f;
    CHECK(detail::math_path_root_scale(sh) == static_cast<float>(std::sqrt(static_cast<double>(0.1f))));
    sh.scale_given = 0.1;
    CHECK(detail::math_path_root_scale(sh) == static_cast<float>(std::sqrt(0.1)));
    // causal, 4 queries on 2 keys (bottom-right): rows 0 and 1 see no key; _safe_softmax's zeros
    AttentionShape empty{1, 4, 2, 8, 8, true, 0.25f};
    const ForwardResult f = flash_forward(find_recipe("torch-math-sm90"), empty, random_operands(empty, bf16, 52));
    for (std::uint64_t c = 0; c < 16; ++c) CHECK(f.o[c] == 0);
    CHECK(std::isinf(f.lse[0]));
    CHECK(f.lse[0] < 0);
    CHECK(std::isfinite(f.lse[2]));
}

TEST_CASE("torch-math-sm90: each GEMM exact changes bits, and what it refuses", "[flash][torch-math]") {
    const AttentionRecipe r = find_recipe("torch-math-sm90");
    const AttentionShape sh = test::square_shape(2, 200, 64, true);
    const AttentionOperands in = random_operands(sh, bf16, 53, 1.6);
    CHECK(test::choices_changing_nothing(r, sh, in, {"score_product=f64", "pv_product=f64"}).empty());
    CHECK(test::choices_changing_nothing(r, sh, in, {"input=bf16", "o_accumulator=f32"}).size() == 2);
    CHECK_THROWS_WITH(validate(with(r, {"score_product=model"})), Catch::Contains("cuBLAS"));
    CHECK_THROWS_WITH(validate(with(r, {"score_product=amx"})), Catch::Contains("cuBLAS"));
    CHECK_THROWS_WITH(validate(with(find_recipe("fa2-bf16"), {"score_product=ffma"})), Catch::Contains("cuda-math"));
    CHECK_THROWS_WITH(validate(with(find_recipe("naive-f32"), {"pv_product=ffma"})), Catch::Contains("cuda-math"));
    CHECK_THROWS_WITH(validate(with(r, {"p_format=bf16"})), Catch::Contains("float32"));
    CHECK_THROWS_WITH(validate(with(r, {"exp2=ex2.approx"})), Catch::Contains("expf"));
    CHECK_THROWS_WITH(validate(with(r, {"input=e4m3"})), Catch::Contains("bf16, f16 or f32"));
    CHECK_THROWS_WITH(validate(with(r, {"kv_order=reverse"})), Catch::Contains("in order"));
    CHECK_THROWS_WITH(validate(with(r, {"v_quant=mxfp4"})), Catch::Contains("quantizes nothing"));
    CHECK_FALSE(backward_refusal(r).empty());
    const AttentionShape long_rows = test::square_shape(1, 1025, 16);
    CHECK_THROWS_WITH(flash_forward(r, long_rows, random_operands(long_rows, bf16, 54)), Catch::Contains("1024"));
}
