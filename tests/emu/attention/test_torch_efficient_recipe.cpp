// The recipe torch-efficient-sm90 (PyTorch's memory-efficient SDPA, xformers' CUTLASS kernel, read
// from kernel_forward.h and checked on the H100 captures, docs/gpu.md): its row sum over each
// warp's 32 keys, its scores scaled before log2 e, its epilogue (libdevice's logf, the scaled
// max) against the formulas written out here; its tiles by head dimension; each choice alone
// changes bits; what it refuses.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/mem_eff_backward.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/math/libdevice_math.hpp"
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

TEST_CASE("torch-efficient-sm90: each warp's lanes summed from zero, the warps added to l alpha in order",
          "[flash][torch-efficient]") {
    const float c = steps::log2e;
    const steps::OnlineSoftmax f{c, Exp2Kind::cuda_exp2f, false, 2.0f, 1.0f, bf16, RescaleArg::scaled, RowSum::mem_eff};
    steps::OnlineSoftmax cudnn = f;
    cudnn.row_sum = RowSum::cudnn;
    auto pbar = [&](std::uint32_t s, float max) { return cuda_exp2f(a::sub(a::mul(float_from_bits(s), c), max)); };
    // warp w: keys [32 w, 32 w + 32); lane t of it: keys j with (j mod 8) / 2 = t, from zero
    auto warp_sum = [&](const std::vector<std::uint32_t>& s, std::size_t w, float max) {
        float r[4] = {0, 0, 0, 0};
        for (std::size_t j = 32 * w; j < std::min<std::size_t>(32 * w + 32, s.size()); ++j)
            r[(j % 8) / 2] = a::add(r[(j % 8) / 2], pbar(s[j], max));
        return a::add(a::add(r[0], r[1]), a::add(r[2], r[3]));
    };
    int cudnn_differs = 0;
    for (std::uint32_t seed = 1; seed <= 40; ++seed) {
        std::vector<std::uint32_t> s1(64), s2(50), p(64);  // two warps, then a partial second warp
        std::uint32_t x = seed;
        for (auto& v : s1) x = x * 1664525u + 1013904223u, v = bits_of(static_cast<float>(x >> 20) / 311.0f);
        for (auto& v : s2) x = x * 1664525u + 1013904223u, v = bits_of(static_cast<float>(x >> 20) / 257.0f);
        float max1 = -INFINITY, max2 = -INFINITY;
        for (const auto v : s1) max1 = std::max(max1, a::mul(float_from_bits(v), c));
        for (const auto v : s2) max2 = std::max(max2, std::max(max1, a::mul(float_from_bits(v), c)));
        steps::OnlineRowState st, other;
        steps::online_row_step(f, s1.data(), 64, 64, st, p.data(), nullptr);
        steps::online_row_step(cudnn, s1.data(), 64, 64, other, p.data(), nullptr);
        INFO("seed " << seed);
        float l = a::add(warp_sum(s1, 0, max1), warp_sum(s1, 1, max1));  // 0 alpha + w0 + w1
        CHECK(bits_of(st.l) == bits_of(l));
        const float factor = steps::online_row_step(f, s2.data(), 50, 50, st, p.data(), nullptr);
        CHECK(bits_of(factor) == bits_of(cuda_exp2f(a::sub(max1, max2))));  // the scaled maxima
        l = a::add(a::add(a::mul(l, factor), warp_sum(s2, 0, max2)), warp_sum(s2, 1, max2));
        CHECK(bits_of(st.l) == bits_of(l));
        steps::online_row_step(cudnn, s2.data(), 50, 50, other, p.data(), nullptr);
        cudnn_differs += bits_of(st.l) != bits_of(other.l);
    }
    CHECK(cudnn_differs > 0);  // cuDNN's lanes run over the whole tile, fused with the rescale
}

TEST_CASE("torch-efficient-sm90: S scaled before log2 e, the LSE from the scaled max and libdevice's logf",
          "[flash][torch-efficient]") {
    const AttentionRecipe r = find_recipe("torch-efficient-sm90");
    // A row with one key: l = 1, logf(1) = 0, so LSE = RN(t / RN(log2 e)) with t = RN(RN(s scale)
    // RN(log2 e)), and O = V's row (1/1 = 1). q and k of small integers: S = q . k is exact.
    for (const std::uint64_t d : {64u, 128u}) {
        const AttentionShape one = test::square_shape(1, 1, d);
        AttentionOperands x = random_operands(one, bf16, 32);
        float s = 0;
        for (std::size_t ch = 0; ch < d; ++ch) {
            const auto qc = static_cast<float>(static_cast<int>(ch % 5) - 2),
                       kc = static_cast<float>(static_cast<int>(ch % 7) - 3);
            x.q[ch] = bf16_saturating_rne(qc), x.k[ch] = bf16_saturating_rne(kc);
            s += qc * kc;
        }
        const ForwardResult g = flash_forward(r, one, x);
        const float t = a::mul(a::mul(s, one.scale), steps::log2e);
        INFO("D " << d);
        CHECK(bits_of(g.lse[0]) == bits_of(a::div(t, steps::log2e)));
        CHECK(g.o == x.v);
    }
    // Many keys: the LSE is RN(RN(m / RN(log2 e)) + logf(l)) of the row's state, which the
    // recipe's O and a run with torch-flash's epilogue share; torch-flash's LSE differs.
    const AttentionShape sh = test::square_shape(1, 100, 128);
    const AttentionOperands in = random_operands(sh, bf16, 35, 1.5);
    const ForwardResult f = flash_forward(r, sh, in);
    const ForwardResult torch = flash_forward(with(r, {"epilogue=torch-flash"}), sh, in);
    CHECK(f.o == torch.o);  // both O = acc RN(1/l)
    int lse_differs = 0;
    for (std::uint64_t i = 0; i < sh.n_q; ++i) {
        CHECK(std::isfinite(f.lse[i]));
        lse_differs += bits_of(f.lse[i]) != bits_of(torch.lse[i]);
        CHECK(bits_of(f.lse_log2[i]) == bits_of(a::mul(f.lse[i], steps::log2e)));
    }
    CHECK(lse_differs > 0);
    CHECK(libdevice_logf(1.0f) == 0.0f);
    // A row that sees no key (causal, fewer keys than queries): O 0 and LSE -inf.
    AttentionShape empty = {1, 6, 4, 64, 64, true, 0.125f};
    const ForwardResult e = flash_forward(r, empty, random_operands(empty, bf16, 36));
    CHECK(e.lse[0] == -INFINITY);
    CHECK(decode(bf16, e.o[0]) == 0.0);
}

TEST_CASE("torch-efficient-sm90: its tiles by head dimension, each choice changes bits, what it refuses",
          "[flash][torch-efficient]") {
    const AttentionRecipe r = find_recipe("torch-efficient-sm90");
    const std::map<std::string, std::string> settings = recipe_settings(r);
    CHECK(settings.at("block_n") == "mem-eff");
    CHECK(settings.at("scale_log2") == "scale-first");
    CHECK(settings.at("kv_order") == "forward");
    CHECK(settings.at("pv_depth") == "tile");
    CHECK(resolved_block_n(r, 40) == 64);
    CHECK(resolved_block_n(r, 64) == 64);
    CHECK(resolved_block_n(r, 96) == 128);
    CHECK(resolved_block_n(r, 128) == 128);
    CHECK_THROWS_WITH(resolved_block_n(r, 160), Catch::Contains("memory-efficient"));
    // D 128, 300 keys: 128-key tiles, the last partial
    const AttentionShape sh = test::square_shape(2, 300, 128);
    const AttentionOperands in = random_operands(sh, bf16, 33, 1.6);
    CHECK(test::choices_changing_nothing(r, sh, in, {"block_n=128"}) == std::vector<std::string>{"block_n=128"});
    CHECK(test::choices_changing_nothing(r, sh, in,
                                         {"block_n=64", "kv_order=reverse", "scale_log2=f32", "row_sum=cudnn",
                                          "rescale_arg=raw", "epilogue=torch-flash"})
              .empty());
    AttentionOperands b = random_operands(test::square_shape(1, 32, 64), bf16, 34);
    b.d_o = b.q;
    const ForwardResult fwd = flash_forward(r, test::square_shape(1, 32, 64), b);
    CHECK(flash_backward(r, test::square_shape(1, 32, 64), b, fwd).dq.size() == b.q.size());
    CHECK(backward_refusal(r).empty());
    CHECK_FALSE(backward_refusal(with(find_recipe("torch-cudnn-sm90"), {"grad_schedule=mem-eff"})).empty());
    CHECK_THROWS_WITH(validate(with(r, {"p_scale=256"})), Catch::Contains("epilogue"));
    CHECK_THROWS_WITH(validate(with(r, {"softmax=naive"})), Catch::Contains("online"));
    AttentionShape capped = test::square_shape(1, 8, 64);
    capped.softcap = 30;
    CHECK_THROWS_WITH(flash_forward(r, capped, random_operands(capped, bf16, 37)), Catch::Contains("soft-capped"));
}

TEST_CASE("torch-efficient-sm90's backward: its split keys' block orders, from the kernel's iteration",
          "[flash][torch-efficient]") {
    const AttentionRecipe r = find_recipe("torch-efficient-sm90");
    using Orders = std::vector<std::vector<std::uint64_t>>;
    constexpr Alignment TL = Alignment::top_left, BR = Alignment::bottom_right;
    // two key blocks, two splits: split 1 starts at query block 1 and wraps; each query block's dQ
    // is reached first by the split whose first block it is
    MemEffBackwardPlan p = mem_eff_backward_plan(r, 2, 128, 128, 64, false, TL);
    CHECK(p.splits == 2);
    CHECK(p.delta_threads == 2);
    CHECK(p.queries_of_key_block == Orders{{0, 1}, {1, 0}});
    CHECK(p.key_blocks_of_query == Orders{{0, 1}, {1, 0}});
    CHECK_FALSE(mem_eff_dq_note(p).empty());
    // causal: a key block starts at its first query block; query block 1 is split 1's first
    p = mem_eff_backward_plan(r, 2, 128, 128, 64, true, TL);
    CHECK(p.queries_of_key_block == Orders{{0, 1}, {1}});
    CHECK(p.key_blocks_of_query == Orders{{0}, {1, 0}});
    // three blocks: split s starts at s and wraps
    p = mem_eff_backward_plan(r, 1, 150, 150, 32, false, TL);
    CHECK(p.queries_of_key_block == Orders{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}});
    CHECK(p.key_blocks_of_query == Orders{{0, 2, 1}, {1, 0, 2}, {2, 1, 0}});
    // a large grid and few keys: one split, every order the keys' and the queries' own
    p = mem_eff_backward_plan(r, 256, 128, 128, 64, false, TL);
    CHECK(p.splits == 1);
    CHECK(p.queries_of_key_block == Orders{{0, 1}, {0, 1}});
    CHECK(p.key_blocks_of_query == Orders{{0, 1}, {0, 1}});
    CHECK(mem_eff_dq_note(p).empty());
    // causal where n_q != n_kv (getSmallestQueryForKey): from the top left, key block j's first
    // query is its first key's index; from the bottom right, that less n_kv - n_q (at least 0). A
    // key block no query sees is visited by none (its dK and dV stay 0).
    p = mem_eff_backward_plan(r, 1, 128, 256, 64, true, TL);
    CHECK(p.queries_of_key_block == Orders{{0, 1}, {1}, {}, {}});
    CHECK(p.key_blocks_of_query == Orders{{0}, {1, 0}});
    p = mem_eff_backward_plan(r, 1, 128, 256, 64, true, BR);
    CHECK(p.queries_of_key_block == Orders{{0, 1}, {0, 1}, {0, 1}, {1}});
    CHECK(p.key_blocks_of_query == Orders{{0, 1, 2}, {3, 0, 1, 2}});
    p = mem_eff_backward_plan(r, 1, 256, 128, 64, true, BR);  // more queries than keys: none hidden at the top
    CHECK(p.queries_of_key_block == Orders{{2, 3}, {3}});
    CHECK(p.key_blocks_of_query == Orders{{}, {}, {0}, {1, 0}});
    CHECK_THROWS_WITH(mem_eff_backward_plan(r, 1, 64, 64, 128, false, TL), Catch::Contains("D <= 64"));
}

TEST_CASE("torch-efficient-sm90's backward: delta over two threads a row, P by expf, dS times the scale",
          "[flash][torch-efficient]") {
    const AttentionRecipe r = find_recipe("torch-efficient-sm90");
    // delta: thread t an FFMA chain over features 8t..8t+7 of every 16, then the two sums added
    const AttentionShape sh = test::square_shape(1, 64, 40);
    AttentionOperands in = random_operands(sh, bf16, 38, 1.5);
    in.d_o = random_operands(sh, bf16, 39, 1.0).q;
    const ForwardResult f = flash_forward(r, sh, in);
    const BackwardResult b = flash_backward(r, sh, in, f);
    int other_order_differs = 0;
    for (std::uint64_t i = 0; i < sh.n_q; ++i) {
        float t[2] = {0, 0};
        for (int page = 0; page < 4; ++page)
            for (int th = 0; th < 2; ++th)
                for (int e = 0; e < 8; ++e) {
                    const std::uint64_t c = static_cast<std::uint64_t>(16 * page + 8 * th + e);
                    if (c >= 40) continue;
                    t[th] = a::fma(static_cast<float>(decode(bf16, f.o[i * 40 + c])),
                                   static_cast<float>(decode(bf16, in.d_o[i * 40 + c])), t[th]);
                }
        CHECK(bits_of(b.delta[i]) == bits_of(a::add(t[0], t[1])));
        float seq = 0;
        for (std::uint64_t c = 0; c < 40; ++c)
            seq = a::add(seq, a::mul(static_cast<float>(decode(bf16, f.o[i * 40 + c])),
                                     static_cast<float>(decode(bf16, in.d_o[i * 40 + c]))));
        other_order_differs += bits_of(seq) != bits_of(b.delta[i]);
    }
    CHECK(other_order_differs > 0);
    // Each choice of the backward alone changes dQ, dK or dV.
    const AttentionShape two = test::square_shape(1, 128, 64);
    AttentionOperands x = random_operands(two, bf16, 40, 1.5);
    x.d_o = random_operands(two, bf16, 41, 1.0).q;
    // rows of dO and K scaled by 2^-4 .. 2^4 (exact): sums whose order shows in their roundings
    for (std::size_t e = 0; e < x.d_o.size(); ++e) {
        const float by = std::ldexp(1.0f, static_cast<int>((e / 64) % 9) - 4);
        x.d_o[e] = bf16_saturating_rne(static_cast<float>(decode(bf16, x.d_o[e])) * by);
        x.k[e] = bf16_saturating_rne(static_cast<float>(decode(bf16, x.k[e])) * by);
    }
    const ForwardResult fx = flash_forward(r, two, x);
    const BackwardResult base = flash_backward(r, two, x, fx);
    const BackwardResult sequential = flash_backward(with(r, {"delta_sum=sequential"}), two, x, fx);
    CHECK_FALSE(sequential.delta == base.delta);
    CHECK(sequential.dv == base.dv);  // dV does not read delta
    // The orders, seen in float32 gradients (BF16's rounding hides most of an order's last bits):
    // one split (a grid of 256 heads) gives dQ in key order and every key block's query blocks in
    // order, two give key block 1 query blocks 1, 0 and query block 1 key blocks 1, 0.
    const AttentionRecipe f32_grads = with(r, {"grad_format=f32"});
    AttentionShape big = two;
    big.launch_heads = 256;
    const BackwardResult one_split = flash_backward(f32_grads, big, x, fx),
                         split = flash_backward(f32_grads, two, x, fx);
    const auto block0 = static_cast<std::ptrdiff_t>(64 * 64);  // key block 0 visits 0, 1 either way
    CHECK(std::equal(one_split.dv.begin(), one_split.dv.begin() + block0, split.dv.begin()));
    CHECK_FALSE(std::equal(one_split.dv.begin() + block0, one_split.dv.end(), split.dv.begin() + block0));
    CHECK(std::equal(one_split.dq.begin(), one_split.dq.begin() + block0, split.dq.begin()));  // 0, 1 either way
    CHECK_FALSE(std::equal(one_split.dq.begin() + block0, one_split.dq.end(), split.dq.begin() + block0));
    CHECK_THROWS_WITH(flash_backward(with(r, {"grad_schedule=in-order"}), two, x, fx),
                      Catch::Contains("grad_schedule=mem-eff"));
}
