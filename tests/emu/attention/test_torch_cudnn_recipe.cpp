// The recipe torch-cudnn-sm90 (cuDNN's SDPA as PyTorch calls it on an H100, found on the
// captures, docs/gpu.md): its row sum's lanes joined with offset 1 before 2, its epilogue (O by
// MUFU.RCP, the LSE from the scaled max) against the formulas written out here; each of its
// choices alone changes bits; its backward, not modelled, is refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/math/softmax_choices.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/numbers/round.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"
#include "tests/emu/attention/recipe_test_helpers.hpp"

using namespace roundscope;
using namespace roundscope::emu;
namespace a = roundscope::emu::f32_arith;

using test::with;

TEST_CASE("torch-cudnn-sm90: the lanes' tile sums fused into their sums, joined with offset 1, then 2",
          "[flash][torch-cudnn]") {
    const float c = 0x1.715476p-3f;
    const steps::OnlineSoftmax f{c, Exp2Kind::cuda_exp2f, false, 2.0f, 1.0f, bf16, RescaleArg::scaled, RowSum::cudnn};
    auto pbar = [&](std::uint32_t s, float max) {
        return cuda_exp2f(a::sub(a::mul(float_from_bits(s), c), a::mul(max, c)));
    };
    // lane t: keys j with (j mod 8) / 2 = t, in order
    auto lane_sum = [&](const std::vector<std::uint32_t>& s, int t, float max) {
        float sum = 0;
        bool first = true;
        for (std::size_t j = 0; j < s.size(); ++j) {
            if (static_cast<int>(j % 8) / 2 != t) continue;
            sum = first ? pbar(s[j], max) : a::add(sum, pbar(s[j], max));
            first = false;
        }
        return sum;
    };
    int other_join_differs = 0;
    for (std::uint32_t seed = 1; seed <= 40; ++seed) {
        std::vector<std::uint32_t> s1(24), s2(24), p(24);
        std::uint32_t x = seed;
        for (std::size_t j = 0; j < s1.size(); ++j) {
            x = x * 1664525u + 1013904223u, s1[j] = bits_of(static_cast<float>(x >> 20) / 211.0f);
            x = x * 1664525u + 1013904223u, s2[j] = bits_of(static_cast<float>(x >> 20) / 173.0f);
        }
        float max1 = -INFINITY, max2 = -INFINITY;
        for (const auto v : s1) max1 = std::max(max1, float_from_bits(v));
        for (const auto v : s2) max2 = std::max(max2, std::max(max1, float_from_bits(v)));
        steps::OnlineRowState st;
        steps::online_row_step(f, s1.data(), 24, 24, st, p.data(), nullptr);
        float lanes[4];
        for (int t = 0; t < 4; ++t) lanes[t] = lane_sum(s1, t, max1);  // fma(0, alpha, r) = r
        INFO("seed " << seed);
        CHECK(bits_of(st.l) == bits_of(a::add(a::add(lanes[0], lanes[1]), a::add(lanes[2], lanes[3]))));
        const float factor = steps::online_row_step(f, s2.data(), 24, 24, st, p.data(), nullptr);
        CHECK(bits_of(factor) == bits_of(cuda_exp2f(a::sub(a::mul(max1, c), a::mul(max2, c)))));  // scaled maxima
        for (int t = 0; t < 4; ++t) lanes[t] = a::fma(lanes[t], factor, lane_sum(s2, t, max2));
        CHECK(bits_of(st.l) == bits_of(a::add(a::add(lanes[0], lanes[1]), a::add(lanes[2], lanes[3]))));
        other_join_differs += bits_of(st.l) != bits_of(a::add(a::add(lanes[0], lanes[2]), a::add(lanes[1], lanes[3])));
    }
    CHECK(other_join_differs > 0);  // FlashAttention-3's join (offset 2, then 1) is another sum
}

TEST_CASE("torch-cudnn-sm90: O by MUFU.RCP of l, the LSE from the scaled max", "[flash][torch-cudnn]") {
    const AttentionRecipe r = find_recipe("torch-cudnn-sm90");
    // One head of 40 keys in one tile: l and m from the row step, then the epilogue by hand.
    const AttentionShape sh = test::square_shape(1, 40, 64);
    const AttentionOperands in = random_operands(sh, bf16, 31, 1.5);
    const ForwardResult f = flash_forward(r, sh, in);
    const ForwardResult torch = flash_forward(with(r, {"epilogue=torch-flash"}), sh, in);
    int differ = 0;
    for (std::uint64_t i = 0; i < sh.n_q; ++i) {
        const float lse = f.lse[i];
        CHECK(std::isfinite(lse));
        differ += bits_of(lse) != bits_of(torch.lse[i]);
        CHECK(bits_of(f.lse_log2[i]) == bits_of(a::mul(lse, steps::log2e)));
    }
    CHECK(differ > 0);
    // A row with one key: l = 1, lg2(1) = 0, so LSE = RN(RN(s c) ln 2) and O = V's row (rcp(1) = 1).
    // q and k of small integers: S = q . k is exact in any order.
    const AttentionShape one = test::square_shape(1, 1, 64);
    AttentionOperands x = random_operands(one, bf16, 32);
    float s = 0;
    for (std::size_t c = 0; c < 64; ++c) {
        const auto qc = static_cast<float>(static_cast<int>(c % 5) - 2),
                   kc = static_cast<float>(static_cast<int>(c % 7) - 3);
        x.q[c] = bf16_saturating_rne(qc), x.k[c] = bf16_saturating_rne(kc);
        s += qc * kc;
    }
    const ForwardResult g = flash_forward(r, one, x);
    const float c = static_cast<float>(static_cast<double>(one.scale) * 1.4426950408889634);
    CHECK(bits_of(g.lse[0]) == bits_of(a::mul(a::mul(s, c), steps::ln2)));
    CHECK(g.o == x.v);
}

TEST_CASE("torch-cudnn-sm90: each choice changes bits, its backward modelled at D 64 only", "[flash][torch-cudnn]") {
    const AttentionRecipe r = find_recipe("torch-cudnn-sm90");
    const std::map<std::string, std::string> settings = recipe_settings(r);
    CHECK(settings.at("block_n") == "128");
    CHECK(settings.at("kv_order") == "forward");
    CHECK(settings.at("split_kv_sms") == "0");
    // D 128, 300 keys: three tiles of 128 (PyTorch's flash: 64 at this D)
    const AttentionShape sh = test::square_shape(2, 300, 128);
    const AttentionOperands in = random_operands(sh, bf16, 33, 1.6);
    CHECK(test::choices_changing_nothing(r, sh, in,
                                         {"block_n=64", "kv_order=reverse", "rescale_arg=raw", "row_sum=lane-tile",
                                          "epilogue=torch-flash", "epilogue=fa3"})
              .empty());
    AttentionOperands b = random_operands(test::square_shape(1, 32, 64), bf16, 34);
    b.d_o = b.q;
    const ForwardResult fwd = flash_forward(r, test::square_shape(1, 32, 64), b);
    const BackwardResult g = flash_backward(r, test::square_shape(1, 32, 64), b, fwd);
    CHECK(g.dq.size() == b.q.size());
    // its one captured engine is D 64's; cuDNN's backward is its forward's, and only its
    AttentionOperands wide = random_operands(test::square_shape(1, 32, 128), bf16, 35);
    wide.d_o = wide.q;
    CHECK_THROWS_WITH(
        flash_backward(r, test::square_shape(1, 32, 128), wide, flash_forward(r, test::square_shape(1, 32, 128), wide)),
        Catch::Contains("head dimension 64"));
    CHECK_THROWS_WITH(flash_backward(with(r, {"grad_schedule=in-order"}), test::square_shape(1, 32, 64), b, fwd),
                      Catch::Contains("grad_schedule=cudnn"));
    CHECK_FALSE(backward_refusal(with(find_recipe("fa2-bf16"), {"grad_schedule=cudnn"})).empty());
    CHECK_THROWS_WITH(validate(with(r, {"p_scale=256"})), Catch::Contains("epilogue"));
    CHECK_THROWS_WITH(validate(with(r, {"max_offset=8"})), Catch::Contains("max_offset"));
}
