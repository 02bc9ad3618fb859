// Hand-checked casts, one property per line, from the specs' tables and worked examples.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "emu/numbers/round.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

CastOptions with(RoundingMode mode, bool saturate = false) {
    CastOptions o;
    o.mode = mode;
    o.saturate = saturate;
    return o;
}
const CastOptions rne = with(RoundingMode::nearest_even);
const CastOptions rne_sat = with(RoundingMode::nearest_even, true);
constexpr double quiet_nan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();

}  // namespace

// The scalar routine is constexpr: the compiler itself checks these.
static_assert(round_to_format(e4m3, unpack(f32, 0x43E00000u), CastOptions{}) == 0x7E);  // 448
static_assert(convert(e4m3, 0x7E, f32, CastOptions{}) == 0x43E00000u);
static_assert(max_finite_bits(e4m3) == 0x7E && max_finite_bits(e5m2) == 0x7B && max_finite_bits(bf16) == 0x7F7F);

TEST_CASE("E4M3 (OCP): max 448, ties to even at 464, NaN beyond without saturation", "[round]") {
    CHECK(cast_from_f64(448, e4m3, rne) == 0x7E);
    CHECK(cast_from_f64(464, e4m3, rne) == 0x7E);  // tie: 1.110b (even) wins over 1.111b
    CHECK(cast_from_f64(464.0001, e4m3, rne) == 0x7F);
    CHECK(cast_from_f64(-1e9, e4m3, rne) == 0xFF);
    CHECK(cast_from_f64(1e9, e4m3, rne_sat) == 0x7E);
    CHECK(cast_from_f64(-inf, e4m3, rne_sat) == 0xFE);  // satfinite: Inf -> max finite
    CHECK(cast_from_f64(-inf, e4m3, rne) == 0xFF);
    CHECK(cast_from_f64(0x1p-9, e4m3, rne) == 0x01);    // min subnormal
    CHECK(cast_from_f64(0x1p-10, e4m3, rne) == 0x00);   // half of it: tie to even zero
    CHECK(cast_from_f64(-0x1p-10, e4m3, rne) == 0x80);  // signed zero kept
    CHECK(cast_from_f64(0x1.8p-10, e4m3, rne) == 0x01);
}

TEST_CASE("E5M2: max 57344, overflow midpoint rounds to Inf", "[round]") {
    CHECK(cast_from_f64(57344, e5m2, rne) == 0x7B);
    CHECK(cast_from_f64(61440, e5m2, rne) == 0x7C);  // tie: 1.11b is odd, rounds to 2^16 = Inf
    CHECK(cast_from_f64(61439.99, e5m2, rne) == 0x7B);
    CHECK(cast_from_f64(61440, e5m2, rne_sat) == 0x7B);
    CHECK(cast_from_f64(61440, e5m2, with(RoundingMode::toward_zero)) == 0x7B);
    CHECK(cast_from_f64(1e6, e5m2, with(RoundingMode::toward_negative)) == 0x7B);  // IEEE 7.4
    CHECK(cast_from_f64(-1e6, e5m2, with(RoundingMode::toward_negative)) == 0xFC);
}

TEST_CASE("bf16 and f16: ties to even, round to odd, directed modes", "[round]") {
    CHECK(cast_from_f64(1 + 0x1p-8, bf16, rne) == 0x3F80);
    CHECK(cast_from_f64(1 + 0x3p-8, bf16, rne) == 0x3F82);
    CHECK(cast_from_f64(1 + 0x1p-8, bf16, with(RoundingMode::nearest_away)) == 0x3F81);
    CHECK(cast_from_f64(1 + 0x1p-9, bf16, with(RoundingMode::to_odd)) == 0x3F81);
    CHECK(cast_from_f64(1 + 0x3p-8, bf16, with(RoundingMode::to_odd)) == 0x3F81);
    CHECK(cast_from_f64(1 + 0x1p-30, bf16, with(RoundingMode::toward_positive)) == 0x3F81);
    CHECK(cast_from_f64(-1 - 0x1p-30, bf16, with(RoundingMode::toward_positive)) == 0xBF80);
    CHECK(cast_from_f64(65520, f16, rne) == 0x7C00);  // 65504 + half ulp: tie, odd -> Inf
    CHECK(cast_from_f64(65519.99, f16, rne) == 0x7BFF);
    CHECK(cast_from_f64(0x1p-25, f16, rne) == 0x0000);
    CHECK(cast_from_f64(0x1.000001p-25, f16, rne) == 0x0001);
}

TEST_CASE("f64 -> f32 rounds once: 1 + 2^-24 + 2^-52 goes up", "[round]") {
    CHECK(cast_from_f64(1 + 0x1p-24 + 0x1p-52, f32, rne) == 0x3F800001u);
    CHECK(cast_from_f64(1 + 0x1p-24, f32, rne) == 0x3F800000u);
}

TEST_CASE("FP4 E2M1 and FP6: the OCP MX grids, saturating always", "[round]") {
    CHECK(cast_from_f64(5, e2m1, rne) == 0x6);      // between 4 (1.0b) and 6 (1.1b): even is 4
    CHECK(cast_from_f64(2.5, e2m1, rne) == 0x4);    // 2
    CHECK(cast_from_f64(0.25, e2m1, rne) == 0x0);   // tie to 0
    CHECK(cast_from_f64(0.75, e2m1, rne) == 0x2);   // tie between 0.5 (odd) and 1.0
    CHECK(cast_from_f64(-7, e2m1, rne) == 0xF);     // -6: no Inf, no NaN
    CHECK(cast_from_f64(1e30, e2m3, rne) == 0x1F);  // 7.5
    CHECK(cast_from_f64(29, e3m2, rne) == 0x1F);    // 28
    CHECK(decode(e2m1, 0x7) == 6.0);
    CHECK(decode(e2m3, 0x01) == 0.125);
    CHECK(decode(e3m2, 0x01) == 0.0625);
}

TEST_CASE("E8M0: powers of two, ties up, no zero and no sign", "[round]") {
    CHECK(cast_from_f64(1.0, e8m0, rne) == 0x7F);
    CHECK(cast_from_f64(1.5, e8m0, rne) == 0x80);  // tie: 1 is the odd significand
    CHECK(cast_from_f64(1.4, e8m0, rne) == 0x7F);
    CHECK(cast_from_f64(3.0, e8m0, with(RoundingMode::toward_zero)) == 0x80);
    CHECK(cast_from_f64(3.0, e8m0, with(RoundingMode::toward_positive)) == 0x81);
    CHECK(cast_from_f64(0.0, e8m0, rne) == 0xFF);
    CHECK(cast_from_f64(-2.0, e8m0, rne) == 0xFF);
    CHECK(cast_from_f64(0x1p-130, e8m0, rne) == 0x00);  // below 2^-127: the smallest scale
    CHECK(cast_from_f64(0x1p128, e8m0, rne) == 0xFF);
    CHECK(cast_from_f64(0x1p128, e8m0, rne_sat) == 0xFE);
    CHECK(decode(e8m0, 0x00) == 0x1p-127);
    CHECK(std::isnan(decode(e8m0, 0xFF)));
}

TEST_CASE("MXINT8: q * 2^-6, symmetric saturation at +-127/64", "[round]") {
    CHECK(cast_from_f64(0.5, int8, rne) == 0x20);
    CHECK(cast_from_f64(-1.0, int8, rne) == 0xC0);
    CHECK(cast_from_f64(-2.0, int8, rne) == 0x81);
    CHECK(cast_from_f64(1.0 / 128, int8, rne) == 0x00);  // tie to even 0
    CHECK(cast_from_f64(3.0 / 128, int8, rne) == 0x02);
    CHECK(cast_from_f64(quiet_nan, int8, rne) == 0x00);
    CHECK(decode(int8, 0x80) == -2.0);
}

TEST_CASE("UE4M3 and the fnuz formats: no negative numbers / no negative zero", "[round]") {
    CHECK(cast_from_f64(448, ue4m3, rne) == 0x7E);
    CHECK(cast_from_f64(-1, ue4m3, rne) == 0x7F);
    CHECK(cast_from_f64(-1, ue4m3, rne_sat) == 0x00);
    CHECK(cast_from_f64(-0.0, ue4m3, rne) == 0x00);
    CHECK(std::isnan(decode(ue4m3, 0x80)));
    CHECK(cast_from_f64(-0.0, e4m3fnuz, rne) == 0x00);
    CHECK(cast_from_f64(-1e-9, e4m3fnuz, rne) == 0x00);
    CHECK(cast_from_f64(quiet_nan, e4m3fnuz, rne) == 0x80);
    CHECK(cast_from_f64(240, e4m3fnuz, rne) == 0x7F);
    CHECK(cast_from_f64(1e9, e5m2fnuz, rne) == 0x80);
}

TEST_CASE("subnormal flushing: on input (DAZ) and on output (FTZ, after rounding)", "[round]") {
    CastOptions daz = rne, ftz = rne;
    daz.flush_input = true;
    ftz.flush_output = true;
    CHECK(cast_from_f32(0x1p-130f, bf16, daz) == 0x0000);
    CHECK(cast_from_f32(-0x1p-130f, bf16, daz) == 0x8000);
    CHECK(cast_from_f32(0x1p-130f, bf16, rne) == 0x0008);  // 8 quanta of 2^-133
    CHECK(cast_from_f64(0x1p-130, bf16, daz) == 0x0008);   // a normal double: not flushed
    CHECK(cast_from_f64(0x1p-8, e4m3, ftz) == 0x00);       // subnormal e4m3 result
    CHECK(cast_from_f64(0x1.fp-7, e4m3, ftz) == 0x08);     // rounds up to min normal: kept
}

TEST_CASE("NaN conventions: NVIDIA canonical, sign kept, quiet NaN", "[round]") {
    const std::uint32_t negative_nan_payload = 0xFFA00001u;  // quiet, payload 0x200001
    CastOptions keep = rne, quiet = rne;
    keep.nan_sign = NanSign::keep;
    quiet.nan_sign = NanSign::keep;
    quiet.nan_payload = NanPayload::quiet;
    CHECK(convert(f32, negative_nan_payload, bf16, rne) == 0x7FFF);
    CHECK(convert(f32, negative_nan_payload, bf16, keep) == 0xFFFF);
    CHECK(convert(f32, negative_nan_payload, bf16, quiet) == 0xFFC0);
    CHECK(convert(f32, 0x7F800001u, e5m2, quiet) == 0x7E);  // a signalling NaN becomes quiet
    CHECK(convert(f32, negative_nan_payload, e4m3, keep) == 0xFF);
    CHECK(convert(f32, negative_nan_payload, e2m1, rne) == 0x7);  // cuda_fp4: NaN -> +max
}

TEST_CASE("bf16_saturating_rne equals the saturating cast: a sample of float32 and its edges", "[round]") {
    CastOptions o;
    o.saturate = true;
    auto check = [&](std::uint32_t b) {
        const float x = float_from_bits(b);
        INFO(std::hex << b);
        REQUIRE(bf16_saturating_rne(x) == convert(f32, b, bf16, o));
    };
    for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 65521) check(static_cast<std::uint32_t>(b));
    for (const std::uint32_t b :
         {0x00000000u, 0x80000000u, 0x00000001u, 0x00008000u, 0x00018000u, 0x7F7F7FFFu, 0x7F7F8000u, 0x7F7FFFFFu,
          0xFF7F8000u, 0x7F800000u, 0xFF800000u, 0x7F800001u, 0xFFC00000u, 0x3F808000u, 0x3F818000u})
        check(b);
}
