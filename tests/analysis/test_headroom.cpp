// Softmax headroom (analysis/headroom.hpp) reproduces the "Flash Attention Fixed Everything" report: a softmax without
// max subtraction overflows in FP16 exactly for rows whose largest score passes ln(65504) = 11.09, in FP32 past 88.72,
// and the emulated naive kernels give NaN/Inf on exactly those rows, while max subtraction and the online softmax give
// none.
#include <catch2/catch.hpp>

#include <cmath>

#include "analysis/headroom.hpp"
#include "emu/numbers/round.hpp"

using namespace roundscope;
using namespace roundscope::analysis;

TEST_CASE("The naive softmax overflows exactly past ln(max): 11.09 in FP16, 88.72 in FP32 - the online one never",
          "[headroom]") {
    const std::vector<double> top{10.5, 11.0, 11.25, 12.0, 88.5, 89.0};  // each row's largest score (scale 1)
    const std::uint64_t rows = top.size(), keys = 4, d = 8;
    auto tensor = [](const char* name, Shape shape, const std::vector<double>& x) {
        Tensor t = Tensor::zeros(name, DType::f32, std::move(shape));
        for (std::size_t i = 0; i < x.size(); ++i)
            t.set_bits_at(i, emu::cast_from_f64(x[i], emu::f32, emu::CastOptions{}));
        return t;
    };
    std::vector<double> q(rows * d, 0), k(keys * d, 0), v(keys * d, 0.5);
    for (std::uint64_t i = 0; i < rows; ++i) q[i * d] = top[i];
    k[0] = 1;
    for (std::uint64_t j = 1; j < keys; ++j) k[j * d] = -1;
    emu::AttentionInputs in{
        .q = tensor("q", {rows, d}, q), .k = tensor("k", {keys, d}, k), .v = tensor("v", {keys, d}, v)};
    in.n_q = rows, in.n_kv = keys, in.d = in.d_v = d;
    HeadroomOptions o;
    o.softmax_scale = 1;
    const HeadroomResult r = headroom(in, o);
    SECTION("the emulation only where a format is near overflow (the report's setting)") {
        // Every format has rows past its limit (a negative margin): emulated within 1 nat; with a
        // window below every margin none is, and the counts say "not run" rather than "none".
        o.emulate_within = 1;
        const HeadroomResult near = headroom(in, o);
        for (std::size_t f = 0; f < 3; ++f) {
            INFO(near.formats[f].format);
            CHECK(near.formats[f].emulated_naive_nonfinite_rows == r.formats[f].emulated_naive_nonfinite_rows);
            CHECK(near.formats[f].emulated_online_nonfinite_rows == r.formats[f].emulated_online_nonfinite_rows);
        }
        o.emulate_within = -1e9;
        for (const FormatHeadroom& f : headroom(in, o).formats) {
            INFO(f.format);
            CHECK_FALSE(f.emulated_naive_nonfinite_rows.has_value());
            CHECK_FALSE(f.emulated_shifted_nonfinite_rows.has_value());
            CHECK_FALSE(f.emulated_online_nonfinite_rows.has_value());
        }
    }
    REQUIRE(r.formats.size() == 3);
    for (const FormatHeadroom& f : r.formats) {
        INFO(f.format);
        const std::uint64_t expected = f.format == "f16" ? 4 : 1;  // 11.25, 12, 88.5, 89 / only 89
        const double max = f.format == "f16"    ? 65504.0
                           : f.format == "bf16" ? 3.3895313892515355e38
                                                : 3.4028234663852886e38;
        CHECK(f.ln_max == Approx(std::log(max)));
        CHECK(f.naive_exp_overflow_rows == expected);
        CHECK(f.naive_sum_overflow_rows == expected);
        CHECK(f.shifted_overflow_rows == 0);
        CHECK(f.emulated_naive_nonfinite_rows == expected);
        CHECK(f.emulated_shifted_nonfinite_rows == 0);
        CHECK(f.emulated_online_nonfinite_rows == 0);
    }
    CHECK(r.rows[3].max_score == 12.0);
}

TEST_CASE("A naive FP16 sum that overflows with no exp overflowing gives a row of zeros, counted as lost",
          "[headroom]") {
    // Two keys at 10.5: each e^10.5 = 36316 fits FP16, their sum 72631 does not; every P is then
    // e / Inf = 0 and the row's O is all zero, finite: no NaN to see, a wrong answer all the same.
    const std::uint64_t keys = 4, d = 8;
    auto tensor = [](const char* name, Shape shape, const std::vector<double>& x) {
        Tensor t = Tensor::zeros(name, DType::f32, std::move(shape));
        for (std::size_t i = 0; i < x.size(); ++i)
            t.set_bits_at(i, emu::cast_from_f64(x[i], emu::f32, emu::CastOptions{}));
        return t;
    };
    std::vector<double> q(2 * d, 0), k(keys * d, 0), v(keys * d, 0.5);
    q[0] = 10.5, q[d] = 5;  // row 0 overflows the sum, row 1 does not
    k[0] = k[d] = 1, k[2 * d] = k[3 * d] = -1;
    emu::AttentionInputs in{
        .q = tensor("q", {2, d}, q), .k = tensor("k", {keys, d}, k), .v = tensor("v", {keys, d}, v)};
    in.n_q = 2, in.n_kv = keys, in.d = in.d_v = d;
    HeadroomOptions o;
    o.softmax_scale = 1;
    const FormatHeadroom f16 = headroom(in, o).formats[1];
    REQUIRE(f16.format == "f16");
    CHECK(f16.naive_exp_overflow_rows == 0);
    CHECK(f16.naive_sum_overflow_rows == 1);
    CHECK(f16.emulated_naive_nonfinite_rows == 0);
    CHECK(f16.emulated_naive_zero_rows == 1);
    CHECK(f16.emulated_shifted_zero_rows == 0);
    CHECK(f16.emulated_online_zero_rows == 0);
    // V all zero: a row of zeros is then the right answer, not a lost one.
    in.v = tensor("v", {keys, d}, std::vector<double>(keys * d, 0));
    CHECK(headroom(in, o).formats[1].emulated_naive_zero_rows == 0);
}
