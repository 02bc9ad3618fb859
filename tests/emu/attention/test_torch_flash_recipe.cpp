// The recipe torch-flash-sm90 (PyTorch's flash forward as its sm_90 SASS shows it, docs/gpu.md):
// each of its choices does what the SASS does, checked against the formula written out here;
// switched back to FlashAttention-2's defaults it is fa2-bf16 in reverse order, bit for bit, and
// each choice alone changes bits (none is vacuous); the split-KV decision is num_splits_heuristic's,
// and the split path (flash_split_kv.hpp) runs its splits and combine. Its backward pass
// (FlashAttention-2's as PyTorch builds it): delta in dot_do_o's threads against the order
// written out here, dK and dV over the row blocks in reverse (the in-order pass on the row
// blocks reversed), dQ added key block by key block.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_context.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/numbers/round.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"
#include "tests/emu/attention/recipe_test_helpers.hpp"

using namespace roundscope;
using namespace roundscope::emu;
namespace a = roundscope::emu::f32_arith;

namespace {

using test::same_bits;
using test::with;

// Scores of one row (float32 bits) spread over a few units, so that sums round.
std::vector<std::uint32_t> row_scores(int n, std::uint32_t seed) {
    std::vector<std::uint32_t> s(static_cast<std::size_t>(n));
    std::uint32_t x = seed;
    for (auto& v : s) {
        x = x * 1664525u + 1013904223u;
        v = bits_of(static_cast<float>(static_cast<int>(x >> 8) % 4000) / 997.0f);
    }
    return s;
}

}  // namespace

TEST_CASE("torch-flash-sm90: the four lanes' row sums, fused with the rescale, then the butterfly",
          "[flash][torch-flash]") {
    const float c = 0x1.715476p-3f;  // a scale log2(e)
    steps::OnlineSoftmax f{c, Exp2Kind::software, false, 2.0f, 1.0f, bf16, RescaleArg::raw, RowSum::quad_ffma};
    steps::OnlineRowState st;
    std::vector<std::uint32_t> p(16);
    const std::vector<std::uint32_t> s1 = row_scores(16, 1), s2 = row_scores(16, 2);
    // Tile 1: the lanes' plain sums in their key order (2t, 2t+1, 2t+8, 2t+9).
    steps::online_row_step(f, s1.data(), 16, 16, st, p.data(), nullptr);
    float m = -INFINITY, m2 = -INFINITY;
    for (const auto v : s1) m = std::max(m, float_from_bits(v));
    auto pbar = [&](std::uint32_t s, float max) {
        return soft_exp2(a::sub(a::mul(float_from_bits(s), c), a::mul(max, c)));
    };
    float lanes[4];
    for (int t = 0; t < 4; ++t)
        lanes[t] = a::add(a::add(a::add(pbar(s1[2 * t], m), pbar(s1[2 * t + 1], m)), pbar(s1[2 * t + 8], m)),
                          pbar(s1[2 * t + 9], m));
    CHECK(bits_of(st.l) == bits_of(a::add(a::add(lanes[0], lanes[2]), a::add(lanes[1], lanes[3]))));
    CHECK(bits_of(st.m_raw) == bits_of(m));
    // Tile 2 with a larger max: alpha from the raw maxima, each lane fma(l, alpha, its first P).
    std::vector<std::uint32_t> s2_up = s2;
    s2_up[5] = bits_of(m + 1.5f);
    const float factor = steps::online_row_step(f, s2_up.data(), 16, 16, st, p.data(), nullptr);
    for (const auto v : s2_up) m2 = std::max(m2, float_from_bits(v));
    const float alpha = soft_exp2(a::mul(a::sub(m, m2), c));
    CHECK(bits_of(factor) == bits_of(alpha));
    for (int t = 0; t < 4; ++t)
        lanes[t] = a::add(a::add(a::add(a::fma(lanes[t], alpha, pbar(s2_up[2 * t], m2)), pbar(s2_up[2 * t + 1], m2)),
                                 pbar(s2_up[2 * t + 8], m2)),
                          pbar(s2_up[2 * t + 9], m2));
    CHECK(bits_of(st.l) == bits_of(a::add(a::add(lanes[0], lanes[2]), a::add(lanes[1], lanes[3]))));
    // A tile narrower than 8 keys: the lanes without a key still take fma(l, alpha, 0).
    steps::OnlineRowState narrow = st;
    const std::vector<std::uint32_t> s3{bits_of(m2 + 2.0f), bits_of(m2)};
    const float alpha3 = steps::online_row_step(f, s3.data(), 2, 2, narrow, p.data(), nullptr);
    const float m3 = m2 + 2.0f;
    CHECK(bits_of(narrow.lanes[0]) == bits_of(a::add(a::fma(st.lanes[0], alpha3, pbar(s3[0], m3)), pbar(s3[1], m3))));
    for (int t = 1; t < 4; ++t) CHECK(bits_of(narrow.lanes[t]) == bits_of(a::mul(st.lanes[t], alpha3)));
}

TEST_CASE("torch-flash-sm90: exp2f's guard below -126 and __logf's scaling, on an H100's MUFU",
          "[flash][torch-flash]") {
    CHECK(cuda_exp2f(-130.0f) == 0x1p-130f);  // (2^-65)^2, subnormal, exact
    CHECK(cuda_exp2f(-149.0f) == 0x1p-149f);
    CHECK(cuda_exp2f(-151.0f) == 0.0f);  // about 2^-75.5 squared rounds to 0
    CHECK(cuda_exp2f(0.0f) == 1.0f);
    CHECK(cuda_exp2f(-INFINITY) == 0.0f);
    CHECK(std::isnan(cuda_exp2f(NAN)));
    // The H100's values (tests/data/golden/h100's capture): 2^-0.5 one ulp below the correctly
    // rounded 0x3F3504F3; log2 3 correctly rounded; log2 0.5 two ulps above -1.
    CHECK(bits_of(cuda_exp2f(-0.5f)) == 0x3F3504F2u);
    CHECK(bits_of(cuda_log2f(3.0f)) == 0x3FCAE00Du);
    CHECK(bits_of(cuda_log2f(0.5f)) == 0xBF7FFFFEu);
    // __logf: log2 times RN(ln 2); below 2^-126 through the 2^24 scaling.
    CHECK(cuda_logf(1.0f) == 0.0f);
    CHECK(bits_of(cuda_logf(3.0f)) == bits_of(a::mul(float_from_bits(0x3FCAE00Du), 0x1.62e430p-1f)));
    CHECK(bits_of(cuda_log2f(0x1p-140f)) == bits_of(a::add(h100_lg2_ftz(0x1p-116f), -24.0f)));
    CHECK(bits_of(cuda_logf(0x1p-140f)) == bits_of(a::mul(cuda_log2f(0x1p-140f), 0x1.62e430p-1f)));
}

TEST_CASE("torch-flash-sm90: O and LSE of a row with one key, and of a row with none", "[flash][torch-flash]") {
    // Q and K with small integer entries, products in float64: the first causal row sees one key
    // whose score s is exact, so l = 1, O = V's first row, LSE = RN(s scale).
    AttentionShape sh = test::square_shape(1, 40, 64, true);
    AttentionOperands in = random_operands(sh, bf16, 5);
    for (std::size_t i = 0; i < in.q.size(); ++i) {
        in.q[i] = static_cast<std::uint32_t>(
            cast_from_f64(static_cast<double>(static_cast<int>(i * 7 % 5) - 2), bf16, CastOptions{}));
        in.k[i] = static_cast<std::uint32_t>(
            cast_from_f64(static_cast<double>(static_cast<int>(i * 3 % 7) - 3), bf16, CastOptions{}));
    }
    const AttentionRecipe r = with(find_recipe("torch-flash-sm90"), {"score_product=f64"});
    const ForwardResult out = flash_forward(r, sh, in);
    double s00 = 0;
    for (std::uint64_t c = 0; c < sh.d; ++c) s00 += decode(bf16, in.q[c]) * decode(bf16, in.k[c]);
    CHECK(bits_of(out.lse[0]) == bits_of(a::mul(static_cast<float>(s00), sh.scale)));
    for (std::uint64_t c = 0; c < sh.d; ++c) CHECK(out.o[c] == in.v[c]);
    // More queries than keys, causal (bottom-right): the first rows see nothing; PyTorch's
    // epilogue writes LSE +inf and O 0 there.
    AttentionShape wide = sh;
    wide.n_q = 48;
    AttentionOperands more = random_operands(wide, bf16, 6);
    const ForwardResult w = flash_forward(find_recipe("torch-flash-sm90"), wide, more);
    CHECK(w.lse[0] == INFINITY);
    CHECK(decode(bf16, w.o[0]) == 0.0);
    CHECK(std::isfinite(w.lse[47]));
}

TEST_CASE("torch-flash-sm90 with FlashAttention-2's defaults is fa2-bf16 in reverse order - each choice changes bits",
          "[flash][torch-flash]") {
    // D = 112: there c = scale log2(e) in float32 and in double differ (they agree at 64 and 128).
    const AttentionShape sh = test::square_shape(2, 300, 112, false);
    const AttentionOperands in = random_operands(sh, bf16, 11, 1.6);
    const AttentionRecipe fa2_reverse = with(find_recipe("fa2-bf16"), {"kv_order=reverse"});
    const std::vector<std::string> defaults{"exp2=software",      "scale_log2=f32", "rescale_arg=scaled",
                                            "row_sum=sequential", "epilogue=fa2",   "block_n=64",
                                            "split_kv_sms=0"};
    const AttentionRecipe base = with(find_recipe("torch-flash-sm90"), defaults);
    const ForwardResult want = flash_forward(fa2_reverse, sh, in), got = flash_forward(base, sh, in);
    CHECK(same_bits(want.o, got.o));
    CHECK(same_bits(want.lse, got.lse));
    CHECK(test::choices_changing_nothing(
              base, sh, in,
              {"exp2=exp2f", "scale_log2=f64", "rescale_arg=raw", "row_sum=quad-ffma", "epilogue=torch-flash"})
              .empty());
}

TEST_CASE("torch-flash-sm90: tiles by head dimension, PyTorch's split-KV decision and path, what is refused",
          "[flash][torch-flash]") {
    const AttentionRecipe r = find_recipe("torch-flash-sm90");
    CHECK(resolved_block_n(r, 64) == 128);
    CHECK(resolved_block_n(r, 128) == 64);
    CHECK_THROWS_WITH(resolved_block_n(r, 256), Catch::Contains("D <= 128"));
    CHECK(recipe_settings(r).at("block_n") == "auto");
    // num_splits_heuristic on an H100 SXM (132 SMs): B 1, H 2, N 1000, D 128 is 32 query blocks
    // of 64 against 264 slots, 8 blocks of 128 keys: 8 splits; enough heads x blocks (>= 211.2)
    // or one KV block: 1.
    CHECK(torch_flash_splits(2, 1000, 1000, 128, 132) == 8);
    CHECK(torch_flash_splits(16, 1024, 1024, 128, 132) == 1);
    CHECK(torch_flash_splits(13, 1024, 1024, 128, 132) == 1);  // 208 < 211.2, but 13 x 16 x s waves
    CHECK(torch_flash_splits(2, 128, 128, 64, 132) == 1);      // one block of 256 keys
    // The split path: another kernel (64 x 128 tiles, a combine), so other bits, the same values
    // within a few ulps; the same bits on any thread count.
    const AttentionShape split = test::square_shape(2, 1000, 128);
    const AttentionOperands in = random_operands(split, bf16, 3);
    const ForwardResult s1 = flash_forward(r, split, in, 1), s2 = flash_forward(r, split, in, 2);
    const ForwardResult unsplit = flash_forward(with(r, {"split_kv_sms=0"}), split, in);
    CHECK(same_bits(s1.o, s2.o));
    CHECK(same_bits(s1.lse, s2.lse));
    CHECK_FALSE(same_bits(s1.o, unsplit.o));
    CHECK_FALSE(same_bits(s1.lse, unsplit.lse));
    for (std::size_t i = 0; i < s1.lse.size(); ++i) CHECK(std::fabs(s1.lse[i] - unsplit.lse[i]) < 1e-5f);
    CHECK_THROWS_WITH(flash_forward(with(find_recipe("fa2-bf16"), {"split_kv_sms=132"}), split, in),
                      Catch::Contains("epilogue=torch-flash"));
    CHECK_THROWS_WITH(validate(with(r, {"p_scale=256"})), Catch::Contains("epilogue"));
    CHECK_THROWS_WITH(validate(with(find_recipe("fa2-bf16"), {"rescale_arg=raw", "max_adjust=on"})),
                      Catch::Contains("rescale_arg"));
}

namespace {

// dot_do_o written out: thread t of a row holds features page * P + 8 t + e (e = 0..7) of every
// page of P features (64 where the kernel's head dimension is a multiple of 64, else 32), those
// past D zeros; its sum a chain from its first product; the threads joined by xor-butterflies.
float dot_do_o_delta(const std::vector<float>& d_o, const std::vector<float>& o, int kernel_d) {
    const int page = kernel_d % 64 == 0 ? 64 : 32, threads = page / 8;
    std::vector<float> t_sum(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        bool first = true;
        for (int base = 0; base < kernel_d; base += page) {
            for (int e = 0; e < 8; ++e) {
                const auto c = static_cast<std::size_t>(base + 8 * t + e);
                const float x = c < d_o.size() ? d_o[c] : 0.0f, y = c < o.size() ? o[c] : 0.0f;
                t_sum[static_cast<std::size_t>(t)] =
                    first ? a::mul(x, y) : a::fma(x, y, t_sum[static_cast<std::size_t>(t)]);
                first = false;
            }
        }
    }
    const auto& x = t_sum;
    if (threads == 8)
        return a::add(a::add(a::add(x[0], x[4]), a::add(x[2], x[6])), a::add(a::add(x[1], x[5]), a::add(x[3], x[7])));
    return a::add(a::add(x[0], x[2]), a::add(x[1], x[3]));
}

}  // namespace

TEST_CASE("torch-flash-sm90's backward: delta in FlashAttention-2's dot_do_o threads", "[flash][torch-flash]") {
    const AttentionRecipe r = find_recipe("torch-flash-sm90");
    REQUIRE(recipe_settings(r).at("delta_sum") == "fa2-threads");
    const AttentionRecipe sequential = with(r, {"delta_sum=sequential"});
    std::uint32_t x = 12345;
    auto next = [&] {
        x = x * 1664525u + 1013904223u;
        return static_cast<float>(static_cast<int>(x >> 9) % 20001 - 10000) / 1024.0f;
    };
    // D 64 (8 threads, one page), 128 (two pages), 96 (4 threads of 32-feature pages), 40 (run
    // by the D 64 kernel: features past 40 are zeros)
    for (const auto& [d, kernel_d] : {std::pair{64, 64}, {128, 128}, {96, 96}, {40, 64}}) {
        int differ = 0;
        for (int row = 0; row < 200; ++row) {
            std::vector<std::uint32_t> d_o(static_cast<std::size_t>(d)), o(d_o.size());
            std::vector<float> d_o_value(d_o.size()), o_value(d_o.size());
            for (std::size_t c = 0; c < d_o.size(); ++c) {
                d_o[c] = bf16_saturating_rne(next()), o[c] = bf16_saturating_rne(next());
                d_o_value[c] = static_cast<float>(decode(bf16, d_o[c]));
                o_value[c] = static_cast<float>(decode(bf16, o[c]));
            }
            const float got = recipe_delta_row(r, d_o.data(), o.data(), bf16, d);
            INFO("D " << d << " row " << row);
            REQUIRE(bits_of(got) == bits_of(dot_do_o_delta(d_o_value, o_value, kernel_d)));
            differ += bits_of(got) != bits_of(recipe_delta_row(sequential, d_o.data(), o.data(), bf16, d));
        }
        CHECK(differ > 10);  // the order changes delta on many of these rows
    }
    CHECK_THROWS_WITH(flash_head_dim(r, 264), Catch::Contains("up to 256"));
}

TEST_CASE("torch-flash-sm90's backward: its tiles, row blocks in reverse, dQ added key block by key block",
          "[flash][torch-flash]") {
    const AttentionRecipe r = with(find_recipe("torch-flash-sm90"), {"split_kv_sms=0"});
    const AttentionRecipe in_order = with(r, {"grad_schedule=in-order"});
    CHECK(torch_flash_backward_tiles(r, 64).block_m == 128);
    CHECK(torch_flash_backward_tiles(r, 64).block_n == 128);
    CHECK(torch_flash_backward_tiles(r, 128).block_m == 64);
    CHECK(torch_flash_backward_tiles(r, 128).block_n == 128);
    CHECK(torch_flash_backward_tiles(r, 256).block_n == 64);
    // D 128: 64 x 128 tiles. N 320: five row blocks, three key blocks.
    const AttentionShape sh = test::square_shape(1, 320, 128);
    AttentionOperands in = random_operands(sh, bf16, 21, 1.4);
    in.d_o = random_operands(sh, bf16, 22).q;
    const ForwardResult fwd = flash_forward(r, sh, in);
    const BackwardResult got = flash_backward(r, sh, in, fwd, 1);
    const BackwardResult again = flash_backward(r, sh, in, fwd, 2);
    CHECK((got.dq == again.dq && got.dk == again.dk && got.dv == again.dv));
    // dK and dV: the in-order pass over the row blocks reversed is this pass, bit for bit (rows
    // are independent in the forward pass, and delta is each row's own).
    AttentionOperands reversed = in;
    const std::uint64_t d = sh.d, rows = 64;
    for (std::uint64_t b = 0; b < 5; ++b)
        for (std::uint64_t i = 0; i < rows * d; ++i) {
            reversed.q[b * rows * d + i] = in.q[(4 - b) * rows * d + i];
            reversed.d_o[b * rows * d + i] = in.d_o[(4 - b) * rows * d + i];
        }
    const ForwardResult fwd_reversed = flash_forward(in_order, sh, reversed);
    const BackwardResult want = flash_backward(in_order, sh, reversed, fwd_reversed);
    CHECK(want.dk == got.dk);
    CHECK(want.dv == got.dv);
    const BackwardResult plain = flash_backward(in_order, sh, in, fwd);
    CHECK(plain.dk != got.dk);  // the order changes bits
    CHECK(plain.dq != got.dq);  // three chains added, not one
    CHECK(dq_order_note(r, 320, 128).find("3 key blocks") != std::string::npos);
    CHECK(dq_order_note(r, 128, 128).empty());
    CHECK(dq_order_note(in_order, 320, 128).empty());
    // One tile (N 64 at D 128): the schedules agree but for dQ's zeros, which the buffer's
    // atomicAdd makes +0.
    const AttentionShape one = test::square_shape(1, 64, 128, true);
    AttentionOperands small = random_operands(one, bf16, 23);
    small.d_o = random_operands(one, bf16, 24).q;
    const ForwardResult f1 = flash_forward(r, one, small);
    const BackwardResult t = flash_backward(r, one, small, f1), u = flash_backward(in_order, one, small, f1);
    CHECK(t.dk == u.dk);
    CHECK(t.dv == u.dv);
    for (std::size_t i = 0; i < t.dq.size(); ++i) CHECK(t.dq[i] == (u.dq[i] == 0x8000u ? 0u : u.dq[i]));
    CHECK_THROWS_WITH(validate(with(find_recipe("fa2-bf16-torch-compiled"), {"grad_schedule=torch-flash"})),
                      Catch::Contains("grad_schedule"));
    CHECK_THROWS_WITH(validate(with(r, {"grad_quant=mxfp8_e4m3"})), Catch::Contains("grad_schedule"));
}
