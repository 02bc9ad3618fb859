// Names of formats, modes and conventions as the CLI contract spells them, and what each
// convention sets.
#include <catch2/catch.hpp>

#include "emu/numbers/cast_options.hpp"
#include "emu/numbers/format.hpp"
#include "emu/numbers/round.hpp"
#include "lib/error.hpp"

using namespace roundscope;
using namespace roundscope::emu;

TEST_CASE("formats are found by name and by every alias of the CLI contract", "[options]") {
    CHECK(find_format("e4m3") == &all_formats[4]);
    CHECK(*find_format("fp8_e4m3") == e4m3);
    CHECK(*find_format("float8_e4m3fn") == e4m3);
    CHECK(*find_format("float8_e5m2") == e5m2);
    CHECK(*find_format("fp6_e2m3") == e2m3);
    CHECK(*find_format("fp4") == e2m1);
    CHECK(*find_format("fp4_e2m1") == e2m1);
    CHECK(find_format("e4m4") == nullptr);
    CHECK(find_format("") == nullptr);
}

TEST_CASE("rounding modes parse, sr:N only for N in 1..23", "[options]") {
    CastOptions o;
    for (const char* name : {"rne", "rna", "rtz", "up", "down", "odd", "sr"}) {
        parse_rounding_mode(name, o);
        CHECK(rounding_mode_name(o) == name);
    }
    parse_rounding_mode("sr:1", o);
    CHECK((o.mode == RoundingMode::stochastic_bits && o.sr_bits == 1));
    parse_rounding_mode("sr:23", o);
    CHECK(o.sr_bits == 23);
    for (const char* bad : {"sr:0", "sr:24", "sr:", "sr:3x", "sr:-1", "nearest", "RNE", ""})
        CHECK_THROWS_AS(parse_rounding_mode(bad, o), Error);
}

TEST_CASE("conventions set saturation and NaN handling together", "[options]") {
    CHECK(convention_options(Convention::cuda, e4m3).saturate);
    CHECK(!convention_options(Convention::cuda, bf16).saturate);
    CHECK(!convention_options(Convention::ocp, e4m3).saturate);
    CHECK(convention_options(Convention::ocp, e4m3).nan_sign == NanSign::keep);
    CHECK(convention_options(Convention::ml_dtypes, e2m1).nan_to_finite == NanToFinite::negated_zero);
    // torch 2.15 on the CPU (all float32 inputs: tests/peer/test_torch_exhaustive.py)
    const CastOptions torch_bf16 = convention_options(Convention::torch, bf16);
    CHECK(torch_bf16.nan_payload == NanPayload::all_ones);
    CHECK(torch_bf16.nan_sign == NanSign::negative);
    CHECK(convert(f32, 0x7FC00000u, bf16, torch_bf16) == 0xFFFF);
    const CastOptions torch_f16 = convention_options(Convention::torch, f16);
    CHECK(convert(f32, 0x7FA00000u, f16, torch_f16) == 0x7F00);  // payload's top bits, quiet
    CHECK(convert(f32, 0xFFFFFFFFu, f16, torch_f16) == 0xFFFF);
    CHECK(convert(f32, 0x7F800001u, f16, torch_f16) == 0x7E00);
    const CastOptions torch_e4m3 = convention_options(Convention::torch, e4m3);
    CHECK(convert(f32, 0x7F800000u, e4m3, torch_e4m3) == 0x7E);  // Inf saturates to 448
    CHECK(convert(f32, 0xFFC00000u, e4m3, torch_e4m3) == 0xFF);
    CHECK(convert(f32, 0xFFC00000u, e5m2, convention_options(Convention::torch, e5m2)) == 0xFF);
    const CastOptions torch_e8m0 = convention_options(Convention::torch, e8m0);
    CHECK(convert(f32, 0xBF800000u, e8m0, torch_e8m0) == 0x7F);  // -1: its magnitude
    CHECK(convert(f32, 0x00000000u, e8m0, torch_e8m0) == 0x00);  // zero: 2^-127
    CHECK(convert(f32, 0x00000000u, e8m0, convention_options(Convention::cuda, e8m0)) == 0xFF);
    CHECK(convert(f32, 0xFF800000u, e8m0, torch_e8m0) == 0xFF);
    for (const char* name : {"cuda", "ocp", "ml_dtypes", "torch"})
        CHECK(convention_name(*parse_convention(name)) == name);
    CHECK(!parse_convention("numpy"));
}
