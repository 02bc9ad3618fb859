// Names of formats, modes and conventions as the CLI contract spells them, and what each
// convention sets.
#include <catch2/catch.hpp>

#include "emu/numbers/cast_options.hpp"
#include "emu/numbers/format.hpp"
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
    CHECK(convention_options(Convention::torch, bf16).nan_payload == NanPayload::quiet);
    CHECK(convention_options(Convention::torch, bf16).nan_sign == NanSign::positive);
    for (const char* name : {"cuda", "ocp", "ml_dtypes", "torch"})
        CHECK(convention_name(*parse_convention(name)) == name);
    CHECK(!parse_convention("numpy"));
}
