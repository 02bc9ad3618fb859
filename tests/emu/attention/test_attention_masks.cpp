// Masks and grouped-query attention in the emulator (emu/attention/inputs/attention_mask.hpp): every mask
// kind of PyTorch's scaled_dot_product_attention and FlashAttention gives, for every online
// preset, the bits of the scalar reference that reads the mask from its own arrays; a causal
// mask given as a boolean tensor gives the causal flag's bits, forward and backward; grouped
// query heads equal their key-value heads repeated, with dK and dV summed as the recipes say;
// what a recipe cannot take is refused, naming it.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/inputs/attention_mask.hpp"
#include "emu/batch/format_dtype.hpp"
#include "emu/numbers/round.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/error.hpp"
#include "tests/emu/attention/scalar_online_reference.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

constexpr double minus_inf = -std::numeric_limits<double>::infinity();

// A mask for the tests: its tensor (broadcast as `dims` say over [B, H, Nq, Nk]) and the value of
// every (flattened head, row, key) the tests' reference reads, made by the test's own loops.
struct TestMask {
    Tensor tensor;
    std::vector<double> value;  // [B * H][n_q][n_kv]
};

// dims: the mask tensor's [B or 1, H or 1, Nq or 1, Nk or 1]; f(b, h, i, j) its element.
template <class F>
TestMask make_mask(DType dtype, std::array<std::uint64_t, 4> dims, std::uint64_t batch, std::uint64_t heads,
                   std::uint64_t n_q, std::uint64_t n_kv, F f) {
    Tensor t = Tensor::zeros("attn_mask", dtype, Shape(dims.begin(), dims.end()));
    std::uint64_t x = 0;
    for (std::uint64_t b = 0; b < dims[0]; ++b)
        for (std::uint64_t h = 0; h < dims[1]; ++h)
            for (std::uint64_t i = 0; i < dims[2]; ++i)
                for (std::uint64_t j = 0; j < dims[3]; ++j, ++x) {
                    const double v = f(b, h, i, j);
                    t.set_bits_at(x, dtype == DType::boolean ? (v == minus_inf ? 0 : 1)
                                                             : cast_from_f64(v, format_of(dtype), CastOptions{}));
                }
    TestMask m{t, std::vector<double>(batch * heads * n_q * n_kv)};
    for (std::uint64_t b = 0; b < batch; ++b)
        for (std::uint64_t h = 0; h < heads; ++h)
            for (std::uint64_t i = 0; i < n_q; ++i)
                for (std::uint64_t j = 0; j < n_kv; ++j) {
                    const std::uint64_t e = (((dims[0] == 1 ? 0 : b) * dims[1] + (dims[1] == 1 ? 0 : h)) * dims[2] +
                                             (dims[2] == 1 ? 0 : i)) *
                                                dims[3] +
                                            (dims[3] == 1 ? 0 : j);
                    const double v = dtype == DType::boolean ? (t.bits_at(e) != 0 ? 0.0 : minus_inf)
                                                             : decode(format_of(dtype), t.bits_at(e));
                    m.value[((b * heads + h) * n_q + i) * n_kv + j] = v;
                }
    return m;
}

// The band of a row by the definitions in attention_mask.hpp, written again here.
std::pair<std::uint64_t, std::uint64_t> band_of(std::uint64_t i, std::uint64_t n_q, std::uint64_t n_kv, bool causal,
                                                bool top_left, std::int64_t left, std::int64_t right) {
    const std::int64_t p = static_cast<std::int64_t>(i) +
                           (top_left ? 0 : static_cast<std::int64_t>(n_kv) - static_cast<std::int64_t>(n_q));
    std::int64_t begin = 0, end = static_cast<std::int64_t>(n_kv);
    if (causal) end = std::min(end, p + 1);
    if (right >= 0) end = std::min(end, p + right + 1);
    if (left >= 0) begin = std::max<std::int64_t>(0, p - left);
    end = std::max<std::int64_t>(end, 0);
    return {static_cast<std::uint64_t>(std::min(begin, end)), static_cast<std::uint64_t>(end)};
}

// One masked problem: the shape (2 batches x 2 heads, or 4 query heads over 2 key-value heads),
// its mask as the emulator takes it, and the reference's reading of it.
struct MaskCase {
    const char* name;
    AttentionShape shape;
    test::RowMask reference;
};

MaskCase mask_case(int kind, std::uint64_t group) {
    const std::uint64_t batch = 2, heads = 2, n_q = 70, n_kv = 90;
    AttentionShape sh = attention_shape(batch * heads, n_q, n_kv, 32, false);
    sh.kv_group = group;
    ScoreMask mask;
    bool causal = false, top_left = false;
    std::int64_t left = -1, right = -1;
    std::mt19937_64 rng(17 + static_cast<std::uint64_t>(kind));
    std::uniform_real_distribution<double> uniform(-4, 4);
    TestMask dense;
    const char* name = "";
    switch (kind) {
        case 0:  // boolean, per head, 30 % masked, and every key of row 5 masked
            name = "boolean per head";
            dense =
                make_mask(DType::boolean, {batch, heads, n_q, n_kv}, batch, heads, n_q, n_kv,
                          [&](auto, auto, auto i, auto) { return i == 5 || uniform(rng) < -1.6 ? minus_inf : 0.0; });
            break;
        case 1:  // key padding: [B, 1, 1, Nk], batch 0 padded after key 63, batch 1 after 80
            name = "key padding [B, 1, 1, Nk] with causal";
            causal = true;
            dense = make_mask(DType::boolean, {batch, 1, 1, n_kv}, batch, heads, n_q, n_kv,
                              [](auto b, auto, auto, auto j) { return j < (b == 0 ? 64u : 81u) ? 0.0 : minus_inf; });
            break;
        case 2:  // additive float32 [1, H, Nq, Nk] with -inf
            name = "additive float32 [1, H, Nq, Nk]";
            dense = make_mask(DType::f32, {1, heads, n_q, n_kv}, batch, heads, n_q, n_kv,
                              [&](auto, auto, auto, auto) { return uniform(rng) > 3.2 ? minus_inf : uniform(rng); });
            break;
        case 3:  // additive bf16 [Nq, Nk] (an ALiBi-like slope), causal
            name = "additive bf16 [Nq, Nk], causal";
            causal = true;
            dense = make_mask(DType::bf16, {1, 1, n_q, n_kv}, batch, heads, n_q, n_kv, [](auto, auto, auto i, auto j) {
                return -0.0625 * std::fabs(double(i) + 20 - double(j));
            });
            break;
        case 4:
            name = "top-left causal";
            causal = true, top_left = true;
            break;
        case 5:
            name = "window (8, 3), not causal";
            left = 8, right = 3;
            break;
        case 6:
            name = "causal with a window of 20 to the left";
            causal = true, left = 20;
            break;
        default:
            name = "boolean [B, 1, Nq, Nk], top-left causal, window right 0";
            causal = true, top_left = true, right = 0;
            dense = make_mask(DType::boolean, {batch, 1, n_q, n_kv}, batch, heads, n_q, n_kv,
                              [&](auto, auto, auto, auto) { return uniform(rng) < -3.0 ? minus_inf : 0.0; });
    }
    sh.causal = causal;
    mask.alignment = top_left ? Alignment::top_left : Alignment::bottom_right;
    mask.window_left = left, mask.window_right = right;
    if (dense.tensor.size() > 0) mask.dense.emplace_back(dense.tensor, batch, heads, n_q, n_kv, "tensor 'attn_mask'");
    sh.mask = std::make_shared<const ScoreMask>(mask);
    test::RowMask reference{[=](std::uint64_t i) { return band_of(i, n_q, n_kv, causal, top_left, left, right); },
                            [value = dense.value, n_q, n_kv](std::uint64_t head, std::uint64_t i, std::uint64_t j) {
                                return value.empty() ? 0.0 : value[(head * n_q + i) * n_kv + j];
                            }};
    return {name, sh, reference};
}

constexpr int mask_kinds = 8;

// A causal shape (bottom-right) with its mask given instead as a boolean [1, 1, Nq, Nk] tensor:
// the same mask, the causal flag off.
AttentionShape causal_as_tensor(const AttentionShape& flag) {
    const std::uint64_t h = flag.heads, nq = flag.n_q, nk = flag.n_kv;
    AttentionShape tensor = flag;
    tensor.causal = false;
    const TestMask causal = make_mask(DType::boolean, {1, 1, nq, nk}, 1, h, nq, nk,
                                      [&](auto, auto, auto i, auto j) { return j + nq <= i + nk ? 0.0 : minus_inf; });
    ScoreMask m;
    m.dense.emplace_back(causal.tensor, 1, h, nq, nk, "tensor 'attn_mask'");
    tensor.mask = std::make_shared<const ScoreMask>(m);
    return tensor;
}

bool additive(int kind) { return kind == 2 || kind == 3; }

}  // namespace

TEST_CASE("Every mask kind in the emulator equals the scalar reference bit for bit, for every online preset",
          "[flash][mask]") {
    for (const AttentionRecipe& preset : recipe_presets()) {
        if (preset.softmax.kind != SoftmaxKind::online || preset.p_and_v.v_quant != nullptr ||
            preset.softmax.max_adjust)
            continue;
        for (int kind = 0; kind < mask_kinds; ++kind) {
            for (const std::uint64_t group : {1, 2}) {
                AttentionRecipe r = preset;
                apply_setting(r, "block_m=32");
                apply_setting(r, "block_n=32");
                const MaskCase c = mask_case(kind, group);
                const AttentionOperands in = random_operands(c.shape, *r.target.input, 11 + kind, 2.0);
                INFO(r.name << ": " << c.name << ", group " << group);
                // (the memory-efficient kernel adds a bias before log2 e: not modelled either)
                const bool raw_form = r.softmax.exp2_arg == Exp2Arg::fma || r.softmax.rescale_arg == RescaleArg::raw ||
                                      r.scores.scale_log2 == ScaleLog2::scale_first;
                if (additive(kind) && raw_form) {  // no such kernel form: refused, naming the recipe
                    CHECK_THROWS_WITH(flash_forward(r, c.shape, in, 2),
                                      Catch::Contains("recipe '" + r.name + "'") && Catch::Contains("additive"));
                    continue;
                }
                const ForwardResult f = flash_forward(r, c.shape, in, 2);
                CHECK(test::scalar_mismatches(r, c.shape, in, f, c.reference) == 0);
            }
        }
    }
}

TEST_CASE("A masked key contributes nothing: changing it changes no bit, and a fully masked row is empty",
          "[flash][mask]") {
    const AttentionRecipe r = find_recipe("fa2-bf16");
    const MaskCase c = mask_case(0, 1);  // row 5 of every head has no key
    AttentionOperands in = random_operands(c.shape, *r.target.input, 3);
    const ForwardResult f = flash_forward(r, c.shape, in, 2);
    // head 0's masked keys of row 0 given other values: row 0 of head 0 keeps its bits
    for (std::uint64_t j = 0; j < c.shape.n_kv; ++j) {
        if (c.reference.value(0, 0, j) != minus_inf) continue;
        for (std::uint64_t x = 0; x < c.shape.d; ++x) in.k[j * c.shape.d + x] ^= 0x40;
    }
    const ForwardResult g = flash_forward(r, c.shape, in, 2);
    CHECK(std::equal(f.o.begin(), f.o.begin() + static_cast<std::ptrdiff_t>(c.shape.d_v), g.o.begin()));
    for (std::uint64_t h = 0; h < c.shape.heads; ++h) {
        CHECK(f.lse[h * c.shape.n_q + 5] == -std::numeric_limits<float>::infinity());
        for (std::uint64_t x = 0; x < c.shape.d_v; ++x) CHECK(f.o[(h * c.shape.n_q + 5) * c.shape.d_v + x] == 0);
    }
}

TEST_CASE("A causal mask given as a boolean tensor gives the causal flag's bits, forward and backward",
          "[flash][mask]") {
    for (const AttentionRecipe& preset : recipe_presets()) {
        if (preset.softmax.kind == SoftmaxKind::online_torch || preset.softmax.kind == SoftmaxKind::compiled_torch)
            continue;
        AttentionRecipe r = preset;
        apply_setting(r, "block_m=32");
        apply_setting(r, "block_n=32");
        const AttentionShape flag = attention_shape(2, 70, 90, 32, true), tensor = causal_as_tensor(flag);
        const AttentionOperands in = random_operands(flag, *r.target.input, 5, 2.0);
        INFO(r.name);
        const ForwardResult a = flash_forward(r, flag, in, 2), b = flash_forward(r, tensor, in, 2);
        CHECK(a.o == b.o);
        CHECK(a.lse == b.lse);
        const bool backward = r.softmax.kind == SoftmaxKind::online && r.output.epilogue == Epilogue::fa2 &&
                              r.p_and_v.p_quant == nullptr &&
                              r.target.input->man_bits <= r.backward.ds_format->man_bits;
        if (!backward) continue;
        const BackwardResult ga = flash_backward(r, flag, in, a, 2), gb = flash_backward(r, tensor, in, b, 2);
        CHECK(ga.dq == gb.dq);
        CHECK(ga.dk == gb.dk);
        CHECK(ga.dv == gb.dv);
        CHECK(ga.delta == gb.delta);
    }
}

TEST_CASE("Grouped query heads equal their key-value heads repeated - dK and dV are the group's sums in float32",
          "[flash][gqa]") {
    for (const char* name : {"fa2-bf16", "fa3-fp8", "fa2-bf16-torch"}) {
        AttentionRecipe r = find_recipe(name);
        apply_setting(r, "block_m=32");
        apply_setting(r, "block_n=32");
        AttentionShape gqa = attention_shape(6, 40, 50, 32, true);
        gqa.kv_group = 3;
        const AttentionOperands in = random_operands(gqa, *r.target.input, 9);
        // the same problem with k and v repeated to every query head
        const AttentionShape mha = attention_shape(6, 40, 50, 32, true);
        AttentionOperands repeated = in;
        repeated.k.clear(), repeated.v.clear();
        const std::uint64_t per_head = 50 * 32;
        for (std::uint64_t h = 0; h < 6; ++h) {
            repeated.k.insert(repeated.k.end(), in.k.begin() + static_cast<std::ptrdiff_t>(h / 3 * per_head),
                              in.k.begin() + static_cast<std::ptrdiff_t>((h / 3 + 1) * per_head));
            repeated.v.insert(repeated.v.end(), in.v.begin() + static_cast<std::ptrdiff_t>(h / 3 * per_head),
                              in.v.begin() + static_cast<std::ptrdiff_t>((h / 3 + 1) * per_head));
        }
        INFO(name);
        const ForwardResult f = flash_forward(r, gqa, in, 2), fm = flash_forward(r, mha, repeated, 2);
        CHECK(f.o == fm.o);
        CHECK(f.lse == fm.lse);
        const BackwardResult b = flash_backward(r, gqa, in, f, 2), bm = flash_backward(r, mha, repeated, fm, 2);
        CHECK(b.dq == bm.dq);
        CHECK(b.delta == bm.delta);
        REQUIRE(b.dk.size() == in.k.size());
        REQUIRE(b.dv.size() == in.v.size());
        // each key-value head's dK: its three heads' dK in the gradient format, summed in float32 in
        // head order, rounded once (and not the sum rounded after each addition in BF16)
        std::uint64_t differs_from_bf16_chain = 0;
        for (std::uint64_t kv = 0; kv < 2; ++kv) {
            for (std::uint64_t x = 0; x < per_head; ++x) {
                float sum = 0;
                double chained = 0;
                for (std::uint64_t h = kv * 3; h < kv * 3 + 3; ++h) {
                    const double g = decode(*r.backward.grad_format, bm.dk[h * per_head + x]);
                    sum = f32_arith::add(sum, static_cast<float>(g));
                    chained = decode(*r.backward.grad_format,
                                     cast_from_f64(chained + g, *r.backward.grad_format, CastOptions{}));
                }
                CHECK(b.dk[kv * per_head + x] == steps::saturating_cast(sum, *r.backward.grad_format));
                differs_from_bf16_chain += decode(*r.backward.grad_format, b.dk[kv * per_head + x]) != chained;
            }
        }
        if (*r.backward.grad_format != f32) CHECK(differs_from_bf16_chain > 0);  // the rule is seen to matter
    }
}

TEST_CASE("What a recipe cannot take is refused, naming the recipe and the reason", "[flash][mask]") {
    const MaskCase dense = mask_case(0, 1);
    const AttentionOperands in = random_operands(dense.shape, bf16, 2);
    CHECK_THROWS_WITH(flash_forward(find_recipe("fa2-bf16-torch"), dense.shape, in, 2),
                      Catch::Contains("recipe 'fa2-bf16-torch'") && Catch::Contains("only its causal mask"));
    CHECK_NOTHROW(flash_forward(find_recipe("torch-flash-sm90"), dense.shape, in, 2));  // boolean: taken
    const MaskCase alibi = mask_case(3, 1);
    CHECK_THROWS_WITH(flash_forward(find_recipe("torch-flash-sm90"), alibi.shape, in, 2),
                      Catch::Contains("recipe 'torch-flash-sm90'") && Catch::Contains("exp2_arg=fma"));
}

TEST_CASE(
    "Soft-capped scores: the emulator equals the scalar reference for every online preset that takes them, "
    "with masks too",
    "[flash][softcap]") {
    for (const AttentionRecipe& preset : recipe_presets()) {
        if (preset.softmax.kind != SoftmaxKind::online || preset.p_and_v.v_quant != nullptr ||
            preset.softmax.max_adjust)
            continue;
        for (const int kind : {4, 0, 5}) {  // top-left causal, a boolean mask, a window
            AttentionRecipe r = preset;
            apply_setting(r, "block_m=32");
            apply_setting(r, "block_n=32");
            MaskCase c = mask_case(kind, 2);
            c.shape.softcap = 2.5;  // below the scores' spread: the cap bites
            const AttentionOperands in = random_operands(c.shape, *r.target.input, 31 + kind, 3.0);
            INFO(r.name << ": " << c.name);
            if (r.output.epilogue != Epilogue::fa2) {
                CHECK_THROWS_WITH(flash_forward(r, c.shape, in, 2), Catch::Contains("soft-capped"));
                continue;
            }
            const ForwardResult f = flash_forward(r, c.shape, in, 2);
            CHECK(test::scalar_mismatches(r, c.shape, in, f, c.reference) == 0);
            AttentionShape uncapped = c.shape;
            uncapped.softcap = 0;
            CHECK(flash_forward(r, uncapped, in, 2).o != f.o);
        }
    }
    const MaskCase plain = mask_case(4, 1);
    AttentionShape capped = plain.shape;
    capped.softcap = 30;
    const AttentionOperands in = random_operands(capped, bf16, 2);
    for (const char* name : {"fa2-bf16-torch", "naive-f32"})
        CHECK_THROWS_WITH(
            flash_forward(find_recipe(name), capped, random_operands(capped, *find_recipe(name).target.input, 2), 1),
            Catch::Contains(std::string("recipe '") + name + "'") && Catch::Contains("soft-capped"));
}

namespace {

// The naive softmax of one row written from its definition (attention_recipe.hpp): the row's
// scores x = RN(RN(s scale) + b) in the softmax format (b the mask's value; -inf left out), e =
// RN(exp2(RN(RN(x - shift) log2 e))) with shift the row's max (0 without max subtraction), l their
// sum in the row-sum format, P = RN(e / l) cast to P's format, O = P V / S; LSE = shift log2 e +
// log2 l.
test::RowResult naive_row(const AttentionRecipe& r, const AttentionShape& sh, const AttentionOperands& in,
                          std::uint64_t head, std::uint64_t i, const test::RowMask& mask) {
    namespace a = f32_arith;
    const Format& f = *r.softmax.format;
    const Format& sum_format = r.softmax.row_sum_format != nullptr ? *r.softmax.row_sum_format : f;
    auto round = [](double x, const Format& g) { return rounded_value(x, g); };
    const test::ScalarProduct score{
        r.scores.product, find_mma_model(r.target.arch, r.target.instruction, *r.target.input, *r.target.input, f32),
        r.target.input, r.target.input};
    const test::ScalarProduct pv{
        r.p_and_v.product,
        find_mma_model(r.target.arch, r.target.instruction, *r.p_and_v.p_format, *r.target.input, f32),
        r.p_and_v.p_format, r.target.input};
    const std::uint64_t d = sh.d, dv = sh.d_v, nk = sh.n_kv, kv = head / sh.kv_group;
    const auto [begin, end] = mask.band(i);
    std::vector<double> x(nk, 0);
    std::vector<char> seen(nk, 0);
    double m = -std::numeric_limits<double>::infinity();
    for (std::uint64_t j = begin; j < end; ++j) {
        const auto b = static_cast<float>(mask.value(head, i, j));
        if (b == -INFINITY) continue;
        seen[j] = 1;
        const float s = float_from_bits(
            score(in.q.data() + (head * sh.n_q + i) * d, in.k.data() + (kv * nk + j) * d, 1, static_cast<int>(d), 0));
        x[j] = round(static_cast<double>(s) * static_cast<double>(sh.scale), f);
        if (b != 0) x[j] = round(x[j] + static_cast<double>(b), f);
        m = std::max(m, x[j]);
    }
    const bool any = m != -std::numeric_limits<double>::infinity();
    const double shift = r.softmax.kind == SoftmaxKind::naive && any ? m : 0.0;
    double l = 0;
    for (std::uint64_t j = 0; j < nk; ++j) {
        if (!seen[j]) continue;
        x[j] = round(exp2_of(a::mul(static_cast<float>(round(x[j] - shift, f)), steps::log2e), r.softmax.exp2), f);
        l = round(l + x[j], sum_format);
    }
    std::vector<std::uint32_t> p(nk, 0);
    for (std::uint64_t j = 0; j < nk; ++j)
        if (seen[j])
            p[j] = steps::cast_p(static_cast<float>(round(x[j] / l, f)), r.p_and_v.p_scale, *r.p_and_v.p_format);
    test::RowResult out{std::vector<std::uint32_t>(dv), !any ? steps::minus_infinity()
                                                             : a::add(a::mul(static_cast<float>(shift), steps::log2e),
                                                                      soft_log2(static_cast<float>(l)))};
    for (std::uint64_t c = 0; c < dv; ++c) {
        const float acc = float_from_bits(
            pv(p.data(), in.v.data() + kv * nk * dv + c, static_cast<long>(dv), static_cast<int>(nk), 0));
        out.o[c] = steps::saturating_cast(a::mul(acc, a::div(1.0f, r.p_and_v.p_scale)), *r.output.format);
    }
    return out;
}

}  // namespace

TEST_CASE("Every mask kind in the naive softmax equals the row written from its definition, bit for bit",
          "[flash][mask]") {
    for (const char* name : {"naive-f32", "naive-bf16", "naive-f16"}) {
        for (const bool shifted : {true, false}) {
            for (int kind = 0; kind < mask_kinds; ++kind) {
                AttentionRecipe r = find_recipe(name);
                if (!shifted) apply_setting(r, "softmax=naive-unshifted");
                const MaskCase c = mask_case(kind, 2);
                const AttentionOperands in = random_operands(c.shape, *r.target.input, 41 + kind);
                const ForwardResult f = flash_forward(r, c.shape, in, 2);
                std::uint64_t mismatches = 0;
                for (std::uint64_t h = 0; h < c.shape.heads; ++h) {
                    for (std::uint64_t i = 0; i < c.shape.n_q; ++i) {
                        const test::RowResult want = naive_row(r, c.shape, in, h, i, c.reference);
                        const std::uint64_t at = (h * c.shape.n_q + i) * c.shape.d_v;
                        mismatches +=
                            !std::equal(want.o.begin(), want.o.end(), f.o.begin() + static_cast<std::ptrdiff_t>(at)) ||
                            bits_of(want.lse2) != bits_of(f.lse_log2[h * c.shape.n_q + i]);
                    }
                }
                INFO(r.name << (shifted ? "" : " unshifted") << ": " << c.name);
                CHECK(mismatches == 0);
            }
        }
    }
    // the reference sees the mask: read without it, the same run differs
    const AttentionRecipe r = find_recipe("naive-f32");
    const MaskCase c = mask_case(0, 1);
    const AttentionOperands in = random_operands(c.shape, *r.target.input, 41);
    const ForwardResult f = flash_forward(r, c.shape, in, 2);
    const test::RowResult unmasked = naive_row(r, c.shape, in, 0, 0, test::causal_mask(c.shape));
    CHECK_FALSE(std::equal(unmasked.o.begin(), unmasked.o.end(), f.o.begin()));
}

TEST_CASE("The naive softmax under a causal flag gives a dense causal mask's bits, for every exact product kind",
          "[flash][mask]") {
    // Under the causal flag P V stops at a block's last visible key (products whose zeros
    // change nothing); a dense mask runs it over every key. Scores spread wide enough that P
    // underflows to zero at visible keys, and V negative and tiny in half its columns, so that
    // -0 products reach the accumulators.
    const AttentionShape flag = attention_shape(2, 70, 90, 32, true), tensor = causal_as_tensor(flag);
    for (const char* name : {"naive-f32", "naive-bf16", "naive-f16"}) {
        for (const char* softmax : {"softmax=naive", "softmax=naive-unshifted"}) {
            for (const char* product : {"pv_product=model", "pv_product=f64"}) {
                AttentionRecipe r = find_recipe(name);
                apply_setting(r, softmax);
                apply_setting(r, product);
                apply_setting(r, "block_m=32");
                AttentionOperands in = random_operands(flag, *r.target.input, 61, 4.0);
                for (std::uint64_t x = 0; x < in.v.size(); x += 2)
                    in.v[x] = static_cast<std::uint32_t>(
                        cast_from_f64(-std::ldexp(1.0 + double(x % 7), -20), *r.target.input, CastOptions{}));
                INFO(name << ", " << softmax << ", " << product);
                const ForwardResult a = flash_forward(r, flag, in, 2), b = flash_forward(r, tensor, in, 2);
                CHECK(a.o == b.o);
                CHECK(a.lse_log2 == b.lse_log2);
            }
        }
    }
}
