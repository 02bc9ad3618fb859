// Property: steps::saturating_cast, the emulator's cast of P, dS, O and the gradients, equals
// round_to_format (nearest even, saturating) on all 2^32 float32 inputs for every format its
// fast path takes (float32's top bits: bf16), and so does the batch cast.
#include <catch2/catch.hpp>

#include "emu/attention/attention_steps.hpp"
#include "tests/emu/exhaustive.hpp"

using namespace roundscope;
using namespace roundscope::emu;

TEST_CASE("saturating_cast's bf16 fast path equals round_to_format on all 2^32 inputs", "[exhaustive][attention]") {
    CastOptions saturating;
    saturating.saturate = true;
    auto options_for = [&](std::uint32_t) { return saturating; };
    auto want = [](float x, const CastOptions& o, std::uint64_t) { return convert(f32, bits_of(x), bf16, o); };
    auto fast = [](float x, const CastOptions&, std::uint64_t) -> std::uint64_t {
        return steps::saturating_cast(x, bf16);
    };
    test::Mismatches mismatches;
    test::check_all_float32<std::uint16_t>(bf16, options_for, want, fast, mismatches);
    INFO(mismatches.report());
    REQUIRE(mismatches.count == 0);
}
