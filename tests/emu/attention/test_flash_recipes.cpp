// The recipe switches of the flash-attention emulator do what they are named after, on inputs
// built to show it: reverse KV order with S = 256 removes most of FP8 P-collapse behind a sink;
// the diagonal fix removes MXFP4 V's future leakage, exactly; the max adjustment leaves no
// P-bar entry at 1 in rows with repeated maxima; the naive FP16 softmax without max
// subtraction overflows just above ln(65504) where the online softmax does not.
#include <catch2/catch.hpp>

#include <cmath>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/random_operands.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

std::uint32_t bits_in(const Format& f, double x) {
    return static_cast<std::uint32_t>(cast_from_f64(x, f, CastOptions{}));
}

// One head whose first four keys are an attention sink: scores about `delta` above the rest
// (through feature 0, where every query holds 4 and the sink keys delta / (4 scale)), the other
// features N(0, 1) scores.
AttentionOperands sink_head(const AttentionShape& sh, const Format& f, double delta) {
    AttentionOperands in = random_operands(
        sh, f, 21, std::pow(static_cast<double>(sh.d), -0.25) * std::sqrt(static_cast<double>(sh.d) / (sh.d - 1)));
    for (std::uint64_t i = 0; i < sh.n_q; ++i) in.q[i * sh.d] = bits_in(f, 4.0);
    for (std::uint64_t j = 0; j < sh.n_kv; ++j)
        in.k[j * sh.d] = bits_in(f, j < 4 ? delta / (4.0 * static_cast<double>(sh.scale)) : 0.0);
    return in;
}

double underflow_fraction(const ForwardCounts& c) {
    return static_cast<double>(c.p_underflow) / static_cast<double>(c.p_nonzero);
}

}  // namespace

TEST_CASE("FP8 P-collapse behind a sink: forward order loses most small P, reverse order with S = 256 almost none",
          "[flash][recipes]") {
    AttentionShape sh = attention_shape(1, 64, 512, 64, false);
    const AttentionOperands in = sink_head(sh, e4m3, 8.0);
    const ForwardResult forward = flash_forward(find_recipe("fp8-forward-order"), sh, in);
    const ForwardResult fixed = flash_forward(find_recipe("fa3-fp8"), sh, in);
    INFO("forward order: " << forward.counts.p_underflow << " of " << forward.counts.p_nonzero
                           << "; fa3-fp8: " << fixed.counts.p_underflow << " of " << fixed.counts.p_nonzero);
    // Phi(8 + 1.03 - 6.93) = Phi(2.1) = 0.98 of the non-sink P underflow with forward order
    CHECK(underflow_fraction(forward.counts) > 0.9);
    CHECK(underflow_fraction(fixed.counts) < 0.001);
    CHECK(fixed.counts.p_saturated == 0);
}

TEST_CASE("MXFP4 V leaks the future into causal attention - the diagonal fix stops it, exactly", "[flash][recipes]") {
    const AttentionShape sh = attention_shape(1, 96, 96, 32, true);
    const AttentionOperands in = random_operands(sh, bf16, 31);
    AttentionOperands changed = in;
    const std::uint64_t j = 40;  // in V block [32, 64)
    for (std::uint64_t c = 0; c < sh.d_v; ++c) changed.v[j * sh.d_v + c] = bits_in(bf16, 37.0 * (c % 3 == 0 ? -1 : 1));
    for (const bool fix : {false, true}) {
        const AttentionRecipe r = find_recipe(fix ? "mxfp4-v-fixed" : "mxfp4-v");
        const ForwardResult a = flash_forward(r, sh, in), b = flash_forward(r, sh, changed);
        std::uint64_t rows_changed = 0;
        for (std::uint64_t i = 0; i < j; ++i) {
            for (std::uint64_t c = 0; c < sh.d_v; ++c) {
                if (a.o[i * sh.d_v + c] != b.o[i * sh.d_v + c]) {
                    ++rows_changed;
                    break;
                }
            }
        }
        INFO(r.name << ": " << rows_changed << " of the rows before token " << j << " changed");
        if (fix)
            CHECK(rows_changed == 0);
        else
            CHECK(rows_changed >= 4);  // rows 32..39 share V[40]'s block scale
        // Parallel against autoregressive: row i with only tokens 0..i present.
        std::uint64_t differing = 0;
        for (std::uint64_t i = 0; i < sh.n_q; i += 5) {
            AttentionShape one = sh;
            one.n_q = 1, one.n_kv = i + 1;
            AttentionOperands prefix;
            prefix.q.assign(in.q.begin() + static_cast<std::ptrdiff_t>(i * sh.d),
                            in.q.begin() + static_cast<std::ptrdiff_t>((i + 1) * sh.d));
            prefix.k.assign(in.k.begin(), in.k.begin() + static_cast<std::ptrdiff_t>((i + 1) * sh.d));
            prefix.v.assign(in.v.begin(), in.v.begin() + static_cast<std::ptrdiff_t>((i + 1) * sh.d_v));
            const ForwardResult ar = flash_forward(r, one, prefix);
            if (!std::equal(ar.o.begin(), ar.o.end(), a.o.begin() + static_cast<std::ptrdiff_t>(i * sh.d_v)))
                ++differing;
        }
        INFO(differing << " rows differ between the parallel and the autoregressive computation");
        if (fix)
            CHECK(differing == 0);
        else
            CHECK(differing > 0);
    }
}

TEST_CASE("The max adjustment leaves no P-bar entry at exactly 1 in rows with a repeated maximum", "[flash][recipes]") {
    AttentionShape sh = attention_shape(1, 64, 128, 32, false);
    AttentionOperands in = random_operands(sh, bf16, 41, 0.1);
    for (std::uint64_t i = 0; i < sh.n_q; ++i) in.q[i * sh.d] = bits_in(bf16, 4.0);
    for (std::uint64_t c = 0; c < sh.d; ++c) in.k[sh.d + c] = in.k[c];  // key 1 = key 0
    in.k[0] = in.k[sh.d] = bits_in(bf16, 4.0);                          // and both dominate
    const ForwardResult plain = flash_forward(find_recipe("fa2-bf16"), sh, in);
    const ForwardResult adjusted = flash_forward(find_recipe("fa2-bf16-max-adjust"), sh, in);
    CHECK(plain.counts.repeated_max_rows == sh.n_q);
    CHECK(plain.counts.p_bar_one == 2 * sh.n_q);
    CHECK(adjusted.counts.repeated_max_rows == sh.n_q);
    CHECK(adjusted.counts.p_bar_one == 0);
    // the softmax is the same function: O agrees to BF16 rounding
    for (std::size_t x = 0; x < plain.o.size(); ++x)
        CHECK(static_cast<double>(std::fabs(plain.o_f32[x] - adjusted.o_f32[x])) <=
              0x1p-6 * (static_cast<double>(std::fabs(plain.o_f32[x])) + 0.05));
}

TEST_CASE("The naive FP16 softmax without max subtraction overflows once a score passes ln(65504) = 11.09",
          "[flash][recipes]") {
    AttentionShape sh = attention_shape(1, 1, 3, 16, false);
    sh.scale = 1;
    for (const double top : {11.0, 11.125}) {
        AttentionOperands in;
        in.q = gaussian_bits(16, f16, 1, 0.0);
        in.q[0] = bits_in(f16, 1.0);
        in.k.assign(3 * 16, bits_in(f16, 0.0));
        in.k[0] = bits_in(f16, top), in.k[16] = bits_in(f16, -4.0), in.k[32] = bits_in(f16, -5.0);
        in.v = gaussian_bits(3 * 16, f16, 2);
        AttentionRecipe unshifted = find_recipe("naive-f16");
        apply_setting(unshifted, "softmax=naive-unshifted");
        const ForwardResult naive = flash_forward(unshifted, sh, in),
                            shifted = flash_forward(find_recipe("naive-f16"), sh, in);
        AttentionRecipe online = find_recipe("fa2-bf16");
        for (const char* setting : {"input=f16", "p_format=f16", "o_format=f16"}) apply_setting(online, setting);
        const ForwardResult fused = flash_forward(online, sh, in);
        bool naive_finite = true;
        for (const float o : naive.o_f32) naive_finite = naive_finite && std::isfinite(o);
        INFO("max score " << top);
        CHECK(naive_finite == (top < 11.09));
        for (const float o : shifted.o_f32) CHECK(std::isfinite(o));
        for (const float o : fused.o_f32) CHECK(std::isfinite(o));
    }
}

TEST_CASE("row_sum_format holds the naive softmax's row sum apart from its exps: a float32 sum of FP16 exps",
          "[flash][recipes]") {
    // three scores of 10.5: each exp (36,316) fits FP16, their sum (108,947) does not
    AttentionShape sh = attention_shape(1, 1, 3, 16, false);
    sh.scale = 1;
    AttentionOperands in;
    in.q.assign(16, bits_in(f16, 0.0));
    in.q[0] = bits_in(f16, 1.0);
    in.k.assign(3 * 16, bits_in(f16, 0.0));
    for (int j = 0; j < 3; ++j) in.k[j * 16] = bits_in(f16, 10.5);
    in.v = gaussian_bits(3 * 16, f16, 3);
    AttentionRecipe half = find_recipe("naive-f16");
    apply_setting(half, "softmax=naive-unshifted");
    AttentionRecipe wide_sum = half, same = half;
    apply_setting(wide_sum, "row_sum_format=f32");
    apply_setting(same, "row_sum_format=f16");
    const ForwardResult h = flash_forward(half, sh, in), w = flash_forward(wide_sum, sh, in),
                        s = flash_forward(same, sh, in);
    CHECK(s.o == h.o);  // naming the softmax format changes nothing
    CHECK(std::isinf(h.lse[0]));
    CHECK(w.lse[0] == Approx(10.5 + std::log(3.0)).epsilon(1e-3));
    for (std::size_t c = 0; c < 16; ++c) {
        INFO("feature " << c);
        CHECK(h.o_f32[c] == 0);  // P = e / inf: the FP16 sum lost the row
        const double mean = (decode(f16, in.v[c]) + decode(f16, in.v[16 + c]) + decode(f16, in.v[32 + c])) / 3;
        CHECK(w.o_f32[c] == Approx(mean).margin(0x1p-9));
    }
}
