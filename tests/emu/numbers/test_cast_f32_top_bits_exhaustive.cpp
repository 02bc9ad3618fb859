// Property: cast_from_f32's bit rule for nearest-even into float32's top bits (bf16) equals
// round_to_format on all 2^32 float32 inputs, saturating and not (alternate chunks of 2^16), and
// so does the batch cast; bf16_saturating_rne, the kernels' branch-light cast, equals the
// saturating cast on all 2^32 inputs (a sample of them in the fast loop).
#include <catch2/catch.hpp>

#include "emu/numbers/round.hpp"
#include "tests/emu/exhaustive.hpp"

using namespace roundscope;
using namespace roundscope::emu;

TEST_CASE("cast_from_f32's bit rule into bf16 equals round_to_format on all 2^32 inputs", "[exhaustive][cast]") {
    REQUIRE(shares_f32_exponent(bf16));
    auto options_for = [](std::uint32_t first) {
        CastOptions o;
        o.saturate = (first >> 16) % 2 == 1;
        return o;
    };
    auto want = [](float x, const CastOptions& o, std::uint64_t) { return convert(f32, bits_of(x), bf16, o); };
    auto fast = [](float x, const CastOptions& o, std::uint64_t) { return cast_from_f32(x, bf16, o); };
    test::Mismatches mismatches;
    test::check_all_float32<std::uint16_t>(bf16, options_for, want, fast, mismatches);
    INFO(mismatches.report());
    REQUIRE(mismatches.count == 0);
}

TEST_CASE("bf16_saturating_rne equals the saturating cast into bf16 on all 2^32 inputs", "[exhaustive][cast]") {
    auto options_for = [](std::uint32_t) {
        CastOptions o;
        o.saturate = true;
        return o;
    };
    auto want = [](float x, const CastOptions& o, std::uint64_t) { return convert(f32, bits_of(x), bf16, o); };
    auto fast = [](float x, const CastOptions&, std::uint64_t) { return std::uint64_t{bf16_saturating_rne(x)}; };
    test::Mismatches mismatches;
    test::check_all_float32<std::uint16_t>(bf16, options_for, want, fast, mismatches);
    INFO(mismatches.report());
    REQUIRE(mismatches.count == 0);
}
