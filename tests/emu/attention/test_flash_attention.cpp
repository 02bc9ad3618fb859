// The flash-attention emulator (emu/attention/flash/flash_attention.hpp) and its recipes: a second, scalar
// implementation of the online forward pass (one row at a time, every product through the
// scalar tensor-core engine) gives the same bits as the tiled emulator for every preset; the
// bits do not depend on the thread count; the recipe switches do what they are named after
// (reverse order and S = 256 remove FP8 P-collapse, the diagonal fix removes future leakage
// of MXFP4 V, the max adjustment removes P-bar = 1, the naive FP16 softmax overflows where
// the online one does not).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "emu/attention/flash/backward_refusal.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_context.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/block/block_format.hpp"
#include "emu/block/mx_block.hpp"
#include "emu/mma/fused_dot_add.hpp"
#include "emu/mma/mma_model.hpp"
#include "lib/error.hpp"

#include "tests/emu/attention/mx_reference.hpp"
#include "tests/emu/attention/scalar_online_reference.hpp"
using namespace roundscope;
using namespace roundscope::emu;

namespace {

namespace a = f32_arith;
using test::RowResult;
using test::scalar_mismatches;
using test::scalar_online_row;

bool same(const std::vector<std::uint32_t>& x, const std::vector<std::uint32_t>& y) { return x == y; }
bool same(const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() &&
           std::equal(x.begin(), x.end(), y.begin(), [](float p, float q) { return bits_of(p) == bits_of(q); });
}

}  // namespace

TEST_CASE("Every preset validates, prints its settings and parses them back", "[flash][recipe]") {
    for (const AttentionRecipe& preset : recipe_presets()) {
        INFO(preset.name);
        CHECK_NOTHROW(validate(preset));
        AttentionRecipe rebuilt;
        for (const auto& [key, value] : recipe_settings(preset)) apply_setting(rebuilt, key + "=" + value);
        CHECK(recipe_settings(rebuilt) == recipe_settings(preset));
        CHECK(find_recipe(preset.name).name == preset.name);
    }
    AttentionRecipe r = find_recipe("fa3-fp8");
    CHECK(r.p_and_v.p_scale == 256);
    CHECK(r.tiles.kv_order == KvOrder::reverse);
    apply_setting(r, "p_scale=16");
    CHECK(r.p_and_v.p_scale == 16);
    CHECK(r.name == "fa3-fp8+");
    CHECK_THROWS_WITH(find_recipe("fa9"), Catch::Contains("unknown recipe 'fa9'"));
    CHECK_THROWS_WITH(apply_setting(r, "colour=red"), Catch::Contains("unknown recipe key 'colour'"));
    CHECK_THROWS_WITH(apply_setting(r, "kv_order=sideways"),
                      Catch::Contains("'kv_order'") && Catch::Contains("forward|reverse"));
    CHECK_THROWS_WITH(apply_setting(r, "p_format=e9m9"), Catch::Contains("'p_format'"));
    CHECK_THROWS_WITH(apply_setting(r, "block_m=0"), Catch::Contains("'block_m'"));
    CHECK_THROWS_WITH(apply_setting(r, "p_scale=-1"), Catch::Contains("'p_scale'"));
    CHECK_THROWS_WITH(apply_setting(r, "nonsense"), Catch::Contains("KEY=VALUE"));
    AttentionRecipe bad = find_recipe("fa2-bf16");
    apply_setting(bad, "block_n=40");
    CHECK_THROWS_WITH(validate(bad), Catch::Contains("multiples of 16"));
    apply_setting(bad, "block_n=64");
    apply_setting(bad, "input=e2m1");
    CHECK_THROWS_WITH(validate(bad), Catch::Contains("no sm90 mma.sync model"));
}

TEST_CASE("The tiled emulator equals a row-at-a-time scalar implementation, bit for bit, for every online preset",
          "[flash]") {
    for (const AttentionRecipe& preset : recipe_presets()) {
        // online presets without V quantization (the MX ones: see the leakage test)
        if (preset.softmax.kind != SoftmaxKind::online || preset.p_and_v.v_quant != nullptr ||
            preset.softmax.max_adjust)
            continue;
        for (const bool causal : {false, true}) {
            AttentionRecipe r = preset;
            apply_setting(r, "block_m=32");  // several row blocks at these sizes
            apply_setting(r, "block_n=32");
            const AttentionShape sh = attention_shape(2, 70, 90, 32, causal);
            const AttentionOperands in = random_operands(sh, *r.target.input, 11, 2.0);
            const ForwardResult f = flash_forward(r, sh, in, 2);
            INFO(r.name << " causal " << causal);
            CHECK(scalar_mismatches(r, sh, in, f) == 0);
        }
    }
}

TEST_CASE("Block-quantized Q, K and P (qk_quant, p_quant) equal the scalar reference bit for bit", "[flash][mx]") {
    for (const char* format : {"mxfp4", "mxfp8_e4m3", "mxfp6_e2m3"}) {
        for (const bool causal : {false, true}) {
            for (const char* which : {"qk_quant", "p_quant", "both"}) {
                AttentionRecipe r = find_recipe("fa2-bf16");
                apply_setting(r, "block_m=32");
                apply_setting(r, "block_n=32");
                if (std::string(which) != "p_quant") apply_setting(r, std::string("qk_quant=") + format);
                if (std::string(which) != "qk_quant") apply_setting(r, std::string("p_quant=") + format);
                const AttentionShape sh = attention_shape(2, 50, 90, 40, causal);  // D = 40: a block of 8 after 32
                const AttentionOperands in = random_operands(sh, *r.target.input, 13, 2.0);
                const ForwardResult f = flash_forward(r, sh, in, 2);
                const ForwardResult plain = flash_forward(find_recipe("fa2-bf16"), sh, in, 2);
                INFO(format << " " << which << " causal " << causal);
                CHECK(scalar_mismatches(r, sh, in, f) == 0);
                CHECK(f.o != plain.o);  // the quantization shows
            }
        }
    }
    // the backward of a quantized P is refused, not run unquantized
    AttentionRecipe r = find_recipe("fa2-bf16");
    apply_setting(r, "p_quant=mxfp4");
    const AttentionShape sh = attention_shape(1, 8, 8, 32, true);
    AttentionOperands in = random_operands(sh, *r.target.input, 3, 1.0);
    in.d_o = in.v;
    const ForwardResult f = flash_forward(r, sh, in, 1);
    CHECK_THROWS_WITH(flash_backward(r, sh, in, f, 1), Catch::Contains("p_quant"));
    AttentionRecipe naive = find_recipe("naive-f32");
    apply_setting(naive, "p_quant=mxfp4");
    CHECK_THROWS_WITH(validate(naive), Catch::Contains("online softmax only"));
    AttentionRecipe fp8 = find_recipe("fa3-fp8");
    apply_setting(fp8, "p_quant=mxfp4");  // an E4M3 P cannot hold every MX value
    CHECK_THROWS_WITH(validate(fp8), Catch::Contains("bf16 or f32"));
}

TEST_CASE("qk_quant's backward is straight through: the plain recipe's on the quantized Q and K, bit for bit",
          "[flash][mx]") {
    for (const bool causal : {false, true}) {
        AttentionRecipe r = find_recipe("fa2-bf16");
        apply_setting(r, "block_m=32");
        apply_setting(r, "block_n=32");
        const AttentionRecipe plain = r;
        apply_setting(r, "qk_quant=mxfp4");
        const AttentionShape sh = attention_shape(2, 50, 90, 40, causal);
        AttentionOperands in = random_operands(sh, *r.target.input, 19, 2.0);
        in.d_o = random_operands(sh, *r.target.input, 23, 1.0).q;
        // Q and K quantized along D, dequantized into BF16: what the score product takes
        const AttentionOperands held = quantized_qk(flash_context(r, sh), in);
        REQUIRE(held.q != in.q);
        const ForwardResult f = flash_forward(r, sh, in, 2), f_held = flash_forward(plain, sh, held, 2);
        REQUIRE(same(f.o, f_held.o));
        const BackwardResult b = flash_backward(r, sh, in, f, 2), b_held = flash_backward(plain, sh, held, f_held, 2);
        INFO("causal " << causal);
        CHECK(same(b.dq, b_held.dq));
        CHECK(same(b.dk, b_held.dk));
        CHECK(same(b.dv, b_held.dv));
        CHECK(same(b.delta, b_held.delta));
        CHECK(b.dq != flash_backward(plain, sh, in, flash_forward(plain, sh, in, 2), 2).dq);  // it shows
    }
}

TEST_CASE("exp2_arg=fma: the forward equals the scalar reference bit for bit, and differs from mul-sub",
          "[flash][exp2_arg]") {
    for (const char* name : {"fa2-bf16", "fa3-fp8"}) {
        for (const bool causal : {false, true}) {
            AttentionRecipe r = find_recipe(name);
            apply_setting(r, "block_m=32");
            apply_setting(r, "block_n=32");
            const AttentionRecipe mul_sub = r;
            apply_setting(r, "exp2_arg=fma");
            const AttentionShape sh = attention_shape(2, 70, 90, 32, causal);
            const AttentionOperands in = random_operands(sh, *r.target.input, 17, 2.0);
            const ForwardResult f = flash_forward(r, sh, in, 2);
            INFO(name << " causal " << causal);
            CHECK(scalar_mismatches(r, sh, in, f) == 0);
            const ForwardResult plain = flash_forward(mul_sub, sh, in, 2);
            CHECK((f.o != plain.o || !same(f.lse, plain.lse)));  // O in BF16 may hide it; the LSE shows
        }
    }
}

TEST_CASE("exp2_arg=fma: the backward's P takes the fused argument - the choice is the online softmax's",
          "[flash][exp2_arg]") {
    // at the max key (lse2 = RN(s c)) the unfused argument is 0 and the fused one the product's
    // rounding error: the first s = 150 + k 2^-12 (s c near 27, where an ulp of the product moves
    // exp2 off 1) where that error is not 0
    const float c = 0x1.715476p-3f;
    float s = 150.0f;
    while (f32_arith::fma(s, c, -f32_arith::mul(s, c)) == 0.0f && s < 151.0f) s = f32_arith::add(s, 0x1p-12f);
    const float lse2 = f32_arith::mul(s, c);
    const float fused = f32_arith::fma(s, c, -lse2), unfused = f32_arith::sub(f32_arith::mul(s, c), lse2);
    REQUIRE(bits_of(fused) != bits_of(unfused));
    const steps::BackwardElement e =
        steps::backward_element(bits_of(s), bits_of(1.0f), true, lse2, 0.0f, c, Exp2Kind::software, f32, Exp2Arg::fma);
    CHECK(bits_of(e.p) == bits_of(soft_exp2(fused)));
    CHECK(e.p != 1.0f);  // P at the max is not 1
    const steps::BackwardElement plain =
        steps::backward_element(bits_of(s), bits_of(1.0f), true, lse2, 0.0f, c, Exp2Kind::software, f32);
    CHECK(bits_of(plain.p) == bits_of(soft_exp2(unfused)));
    // the whole backward runs with it, on every thread count alike (its BF16 gradients rarely move:
    // P changes by ulps of float32 where P-bar is near 1, below a BF16 ulp of dS)
    AttentionRecipe r = find_recipe("fa2-bf16");
    apply_setting(r, "exp2_arg=fma");
    const AttentionShape sh = attention_shape(1, 40, 40, 32, true);
    AttentionOperands in = random_operands(sh, *r.target.input, 9, 6.0);  // scores of tens of nats
    in.d_o = in.v;
    const ForwardResult f = flash_forward(r, sh, in, 1);
    const BackwardResult b1 = flash_backward(r, sh, in, f, 1), b2 = flash_backward(r, sh, in, f, 2);
    CHECK(same(b1.dq, b2.dq));
    CHECK(same(b1.dk, b2.dk));
    AttentionRecipe naive = find_recipe("naive-f32");
    apply_setting(naive, "exp2_arg=fma");
    CHECK_THROWS_WITH(validate(naive), Catch::Contains("exp2_arg"));
}

TEST_CASE("The emulator's bits do not depend on the thread count, forward and backward", "[flash]") {
    for (const char* name : {"fa2-bf16", "fa3-fp8", "mxfp4-v-fixed"}) {
        const AttentionRecipe r = find_recipe(name);
        const AttentionShape sh = attention_shape(2, 150, 130, 64, true);
        const AttentionOperands in = random_operands(sh, *r.target.input, 5);
        const ForwardResult one = flash_forward(r, sh, in, 1), two = flash_forward(r, sh, in, 2);
        INFO(name);
        CHECK(same(one.o, two.o));
        CHECK(same(one.lse, two.lse));
        const BackwardResult b1 = flash_backward(r, sh, in, one, 1), b2 = flash_backward(r, sh, in, two, 2);
        CHECK(same(b1.dq, b2.dq));
        CHECK(same(b1.dk, b2.dk));
        CHECK(same(b1.dv, b2.dv));
        CHECK(same(b1.delta, b2.delta));
    }
}

TEST_CASE("One key: O is V and P-bar is 1", "[flash]") {
    const AttentionRecipe r = find_recipe("fa2-bf16");
    const AttentionShape sh = attention_shape(1, 3, 1, 16, false);
    const AttentionOperands in = random_operands(sh, bf16, 3);
    const ForwardResult f = flash_forward(r, sh, in);
    for (std::uint64_t i = 0; i < 3; ++i) {
        for (std::uint64_t c = 0; c < 16; ++c) CHECK(f.o[i * 16 + c] == in.v[c]);
    }
    CHECK(f.counts.p_bar_one == 3);
}

TEST_CASE("The online row step may write P over its own scores (as the CUDA kernel does)", "[flash]") {
    const std::vector<std::uint32_t> scores = gaussian_bits(64, f32, 9, 3.0);
    steps::OnlineSoftmax f{steps::scale_log2(0.125f), Exp2Kind::software, true, 2.0f, 256.0f, e4m3};
    for (const int visible : {0, 1, 40, 64}) {
        steps::OnlineRowState a, b;
        a.m = b.m = 1.5f, a.l = b.l = 3.0f;
        std::vector<std::uint32_t> p(64), in_place = scores;
        const float fa = steps::online_row_step(f, scores.data(), 64, visible, a, p.data(), nullptr);
        const float fb = steps::online_row_step(f, in_place.data(), 64, visible, b, in_place.data(), nullptr);
        CHECK(bits_of(fa) == bits_of(fb));
        CHECK(p == in_place);
        CHECK((bits_of(a.m) == bits_of(b.m) && bits_of(a.l) == bits_of(b.l)));
    }
}

TEST_CASE("A backward asked for dQ alone or delta alone gives the bits of the whole backward", "[flash][backward]") {
    // Every preset whose backward is modelled, causal with grouped queries, and one under
    // stochastic grad_quant (whose per-tile seeds must not shift when dK and dV are left out).
    AttentionShape shape = attention_shape(4, 70, 90, 64, true);
    shape.kv_group = 2;
    std::vector<AttentionRecipe> recipes;
    for (const AttentionRecipe& preset : recipe_presets())
        if (backward_refusal(preset, shape).empty() &&
            preset.target.input->man_bits <= preset.backward.ds_format->man_bits)
            recipes.push_back(preset);
    AttentionRecipe quantized = find_recipe("fa2-bf16");
    apply_setting(quantized, "grad_quant=mxfp8_e4m3");
    apply_setting(quantized, "grad_rounding=stochastic");
    recipes.push_back(quantized);
    REQUIRE(recipes.size() >= 10);
    for (const AttentionRecipe& r : recipes) {
        INFO(r.name);
        const AttentionOperands in = random_operands(shape, *r.target.input, 71);
        const ForwardResult f = flash_forward(r, shape, in, 2);
        const BackwardResult all = flash_backward(r, shape, in, f, 2);
        const BackwardResult dq = flash_backward(r, shape, in, f, 2, nullptr, BackwardOutputs::dq);
        const BackwardResult delta = flash_backward(r, shape, in, f, 2, nullptr, BackwardOutputs::delta);
        CHECK(dq.dq == all.dq);
        CHECK(dq.delta == all.delta);
        CHECK(delta.delta == all.delta);
        CHECK_FALSE(all.dk.empty());
        if (r.softmax.kind == SoftmaxKind::aten_cpu || r.softmax.kind == SoftmaxKind::aten_cpu_math) continue;
        CHECK(dq.dk.empty());
        CHECK(dq.dv.empty());
        CHECK(delta.dq.empty());
    }
}
