// The flash-attention emulator (emu/attention/flash_attention.hpp) and its recipes: a second, scalar
// implementation of the online forward pass (one row at a time, every product through the
// scalar tensor-core engine) gives the same bits as the tiled emulator for every preset; the
// bits do not depend on the thread count; the recipe switches do what they are named after
// (reverse order and S = 256 remove FP8 P-collapse, the diagonal fix removes future leakage
// of MXFP4 V, the max adjustment removes P-bar = 1, the naive FP16 softmax overflows where
// the online one does not).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "emu/attention/attention_steps.hpp"
#include "emu/attention/flash_attention.hpp"
#include "emu/attention/flash_context.hpp"
#include "emu/attention/random_operands.hpp"
#include "emu/block/block_format.hpp"
#include "emu/block/mx_block.hpp"
#include "emu/mma/fused_dot_add.hpp"
#include "emu/mma/mma_model.hpp"
#include "lib/error.hpp"

#include "tests/emu/attention/mx_reference.hpp"
using namespace roundscope;
using namespace roundscope::emu;

namespace {

namespace a = f32_arith;

// The online forward pass of one query row, written straight from the recipe's definition:
// no tiles of rows, every S and P V element from mma_dot (or float64 where the recipe says so).
// O in o_format bits and lse_log2.
struct RowResult {
    std::vector<std::uint32_t> o;
    float lse2;
};

// One product element as the recipe takes it: D = C + a . b (b with a stride) through the
// tensor-core model, or in float64 (exact products summed in order from C, rounded once).
struct ScalarProduct {
    Product kind;
    const MmaModel* model;
    const Format *a_format, *b_format;
    std::uint32_t operator()(const std::uint32_t* a, const std::uint32_t* b, long stride, int k,
                             std::uint32_t c) const {
        if (kind == Product::model) return mma_dot(*model, a, b, stride, k, c);
        double sum = float_from_bits(c);
        for (int t = 0; t < k; ++t) sum += decode(*a_format, a[t]) * decode(*b_format, b[t * stride]);
        return bits_of(static_cast<float>(sum));
    }
};

std::vector<std::uint32_t> mx_blocks(const std::uint32_t* x, std::size_t n, const Format& f, const BlockFormat& b,
                                     const Format& to) {
    return test::mx_blocks(x, n, 1, f, b, to);
}

RowResult scalar_online_row(const AttentionRecipe& r, const AttentionShape& sh, const AttentionOperands& in,
                            std::uint64_t head, std::uint64_t i) {
    const ScalarProduct score{r.score_product, find_mma_model(r.arch, r.instruction, *r.input, *r.input, f32), r.input,
                              r.input};
    const ScalarProduct pv{r.pv_product, find_mma_model(r.arch, r.instruction, *r.p_format, *r.input, f32), r.p_format,
                           r.input};
    const std::uint64_t d = sh.d, dv = sh.d_v, nk = sh.n_kv;
    // qk_quant: q and every key quantized along D first
    std::vector<std::uint32_t> q_row(in.q.begin() + static_cast<std::ptrdiff_t>((head * sh.n_q + i) * d),
                                     in.q.begin() + static_cast<std::ptrdiff_t>((head * sh.n_q + i + 1) * d));
    std::vector<std::uint32_t> keys(in.k.begin() + static_cast<std::ptrdiff_t>(head * nk * d),
                                    in.k.begin() + static_cast<std::ptrdiff_t>((head + 1) * nk * d));
    if (r.qk_quant != nullptr) {
        q_row = mx_blocks(q_row.data(), d, *r.input, *r.qk_quant, *r.input);
        for (std::uint64_t j = 0; j < nk; ++j) {
            const std::vector<std::uint32_t> kj = mx_blocks(keys.data() + j * d, d, *r.input, *r.qk_quant, *r.input);
            std::copy(kj.begin(), kj.end(), keys.begin() + static_cast<std::ptrdiff_t>(j * d));
        }
    }
    const std::uint32_t* q = q_row.data();
    const std::uint32_t* k = keys.data();
    const std::uint32_t* v = in.v.data() + head * nk * dv;
    const std::int64_t position = static_cast<std::int64_t>(i + nk) - static_cast<std::int64_t>(sh.n_q);
    const std::uint64_t visible =
        !sh.causal
            ? nk
            : static_cast<std::uint64_t>(std::clamp<std::int64_t>(position + 1, 0, static_cast<std::int64_t>(nk)));
    // The constant c, and the row's state: max m (log2 units), raw max, sum l or four lanes' sums.
    const float scale_log2 = r.scale_log2 == ScaleLog2::f64
                                 ? static_cast<float>(static_cast<double>(sh.scale) * 1.4426950408889634074)
                                 : steps::scale_log2(sh.scale);
    const bool quad = r.row_sum == RowSum::quad_ffma;
    float m = steps::minus_infinity(), m_raw = steps::minus_infinity(), l = 0;
    float lanes[4] = {0, 0, 0, 0};
    std::vector<std::uint32_t> acc(dv, 0);
    std::vector<std::uint64_t> starts;
    for (std::uint64_t c0 = 0; c0 < nk; c0 += static_cast<std::uint64_t>(r.block_n)) starts.push_back(c0);
    if (r.kv_order == KvOrder::reverse) std::reverse(starts.begin(), starts.end());
    // the tiles the emulator skips: masked for every row of the row block
    const std::uint64_t block_last =
        std::min<std::uint64_t>((i / static_cast<std::uint64_t>(r.block_m) + 1) * static_cast<std::uint64_t>(r.block_m),
                                sh.n_q) -
        1;
    const std::int64_t last_position = static_cast<std::int64_t>(block_last + nk) - static_cast<std::int64_t>(sh.n_q);
    for (const std::uint64_t c0 : starts) {
        const std::uint64_t c1 = std::min<std::uint64_t>(c0 + static_cast<std::uint64_t>(r.block_n), nk);
        if (sh.causal && static_cast<std::int64_t>(c0) > last_position) continue;
        std::vector<float> t(c1 - c0), raw(c1 - c0);
        float block_max = steps::minus_infinity(), raw_max = steps::minus_infinity();
        for (std::uint64_t j = c0; j < c1; ++j) {
            std::vector<std::uint32_t> kj(k + j * d, k + (j + 1) * d);
            const float s = float_from_bits(score(q, kj.data(), 1, static_cast<int>(d), 0));
            raw[j - c0] = s;
            t[j - c0] = j < visible ? a::mul(s, scale_log2) : steps::minus_infinity();
            block_max = std::max(block_max, t[j - c0]);
            if (j < visible) raw_max = std::max(raw_max, s);
        }
        const float m_new = std::max(m, block_max), m_raw_new = std::max(m_raw, raw_max);
        float factor = steps::rescale(m, m_new, r.exp2);
        if (r.rescale_arg == RescaleArg::raw)  // exp2(RN(RN(m_old - m_new) c)), the raw maxima
            factor = m_raw == steps::minus_infinity()
                         ? 0.0f
                         : exp2_of(a::mul(a::sub(m_raw, steps::usable_max(m_raw_new)), scale_log2), r.exp2);
        float sum = 0;
        std::vector<float> pbar(c1 - c0);
        std::vector<std::uint32_t> p(c1 - c0);
        for (std::uint64_t j = 0; j < c1 - c0; ++j) {
            // P-bar = exp2(RN(t - m)), or with s c - m in one rounding; a masked key's t is -inf
            pbar[j] = r.exp2_arg == Exp2Arg::fma && c0 + j < visible
                          ? exp2_of(a::fma(raw[j], scale_log2, -steps::usable_max(m_new)), r.exp2)
                          : exp2_of(a::sub(t[j], steps::usable_max(m_new)), r.exp2);
            sum = a::add(sum, pbar[j]);
            p[j] = steps::cast_p(pbar[j], r.p_scale, r.p_quant != nullptr ? f32 : *r.p_format);
        }
        if (r.p_quant != nullptr) p = mx_blocks(p.data(), p.size(), f32, *r.p_quant, *r.p_format);  // P * S
        if (quad) {  // lane u: keys 2u, 2u + 1, 2u + 8, 2u + 9, ...; its first fused with the rescale
            for (std::uint64_t u = 0; u < 4; ++u) {
                lanes[u] = a::fma(lanes[u], factor, 2 * u < c1 - c0 ? pbar[2 * u] : 0.0f);
                for (std::uint64_t j = 2 * u + 1; j < c1 - c0; j += (j % 2 == 0 ? 1 : 7))
                    lanes[u] = a::add(lanes[u], pbar[j]);
            }
            l = a::add(a::add(lanes[0], lanes[2]), a::add(lanes[1], lanes[3]));
        } else {
            l = a::add(a::mul(l, factor), sum);
        }
        m = m_new, m_raw = m_raw_new;
        for (std::uint64_t c = 0; c < dv; ++c) {
            const std::uint32_t scaled = bits_of(a::mul(float_from_bits(acc[c]), factor));
            if (*r.o_accumulator == f32) {
                acc[c] = pv(p.data(), v + c0 * dv + c, static_cast<long>(dv), static_cast<int>(c1 - c0), scaled);
            } else {  // the running O rounded to its format after each operation
                const std::uint32_t product =
                    pv(p.data(), v + c0 * dv + c, static_cast<long>(dv), static_cast<int>(c1 - c0), 0);
                auto round = [&](double x) {
                    return decode(*r.o_accumulator, cast_from_f64(x, *r.o_accumulator, CastOptions{}));
                };
                acc[c] = bits_of(
                    static_cast<float>(round(round(float_from_bits(scaled)) + round(float_from_bits(product)))));
            }
        }
    }
    const bool torch = r.epilogue == Epilogue::torch_flash, empty = !(l > 0.0f);
    const float lse_torch = empty ? INFINITY : a::fma(m_raw, sh.scale, cuda_logf(l));
    RowResult out{std::vector<std::uint32_t>(dv), torch ? a::mul(lse_torch, steps::log2e) : steps::lse_log2(m, l)};
    const float factor = torch ? (empty ? 1.0f : a::div(1.0f, l)) : steps::output_factor(l, r.p_scale);
    CastOptions o;
    o.saturate = true;
    for (std::uint64_t c = 0; c < dv; ++c)
        out.o[c] = static_cast<std::uint32_t>(cast_from_f32(a::mul(float_from_bits(acc[c]), factor), *r.o_format, o));
    return out;
}

// Rows whose O bits or LSE bits differ between the tiled emulator's `f` and the scalar rows.
std::uint64_t scalar_mismatches(const AttentionRecipe& r, const AttentionShape& sh, const AttentionOperands& in,
                                const ForwardResult& f) {
    std::uint64_t mismatches = 0;
    for (std::uint64_t head = 0; head < sh.heads; ++head) {
        for (std::uint64_t i = 0; i < sh.n_q; ++i) {
            const RowResult row = scalar_online_row(r, sh, in, head, i);
            const std::uint64_t at = (head * sh.n_q + i) * sh.d_v;
            if (!std::equal(row.o.begin(), row.o.end(), f.o.begin() + static_cast<std::ptrdiff_t>(at))) ++mismatches;
            if (bits_of(row.lse2) != bits_of(f.lse_log2[head * sh.n_q + i])) ++mismatches;
        }
    }
    return mismatches;
}

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
    CHECK(r.p_scale == 256);
    CHECK(r.kv_order == KvOrder::reverse);
    apply_setting(r, "p_scale=16");
    CHECK(r.p_scale == 16);
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
        if (preset.softmax != SoftmaxKind::online || preset.v_quant != nullptr || preset.max_adjust) continue;
        for (const bool causal : {false, true}) {
            AttentionRecipe r = preset;
            apply_setting(r, "block_m=32");  // several row blocks at these sizes
            apply_setting(r, "block_n=32");
            const AttentionShape sh = attention_shape(2, 70, 90, 32, causal);
            const AttentionOperands in = random_operands(sh, *r.input, 11, 2.0);
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
                const AttentionOperands in = random_operands(sh, *r.input, 13, 2.0);
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
    AttentionOperands in = random_operands(sh, *r.input, 3, 1.0);
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
        AttentionOperands in = random_operands(sh, *r.input, 19, 2.0);
        in.d_o = random_operands(sh, *r.input, 23, 1.0).q;
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
            const AttentionOperands in = random_operands(sh, *r.input, 17, 2.0);
            const ForwardResult f = flash_forward(r, sh, in, 2);
            INFO(name << " causal " << causal);
            CHECK(scalar_mismatches(r, sh, in, f) == 0);
            const ForwardResult plain = flash_forward(mul_sub, sh, in, 2);
            CHECK((f.o != plain.o || !same(f.lse, plain.lse)));  // O in BF16 may hide it; the LSE shows
        }
    }
}

TEST_CASE("exp2_arg=fma: the backward's P takes the fused argument; the choice is the online softmax's",
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
    AttentionOperands in = random_operands(sh, *r.input, 9, 6.0);  // scores of tens of nats
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
        const AttentionOperands in = random_operands(sh, *r.input, 5);
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
