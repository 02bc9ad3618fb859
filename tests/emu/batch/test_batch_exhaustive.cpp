// Property: the SIMD batch cast equals the scalar routine on all 2^32 float32 inputs for
// e4m3, bf16 and e2m1 in every mode other than nearest-even (which the comparison with NVIDIA's
// conversions covers): each 2^16-input chunk takes the next mode in turn, so every input is
// checked once and every mode sees 2^29 inputs spread over the whole range.
#include <catch2/catch.hpp>

#include "emu/batch/batch_cast.hpp"
#include "emu/numbers/round.hpp"
#include "tests/emu/exhaustive.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

constexpr const char* modes[] = {"rna", "rtz", "up", "down", "odd", "sr", "sr:3", "sr:13"};

template <class Bits>
void check(const Format& f) {
    auto options_for = [&f](std::uint32_t first) {
        const std::size_t chunk = first >> 16;
        CastOptions o = convention_options(static_cast<Convention>(chunk / 8 % 4), f);
        parse_rounding_mode(modes[chunk % 8], o);
        o.saturate = chunk / 32 % 2;
        o.flush_input = chunk / 64 % 3 == 1;
        o.flush_output = chunk / 64 % 3 == 2;
        o.seed = 77;
        return o;
    };
    auto scalar = [&f](float x, const CastOptions& o, std::uint64_t index) { return cast_from_f32(x, f, o, index); };
    test::Mismatches mismatches;
    test::check_all_float32<Bits>(f, options_for, scalar, nullptr, mismatches);
    INFO(mismatches.report());
    REQUIRE(mismatches.count == 0);
}

}  // namespace

TEST_CASE("batch e4m3 equals scalar on all 2^32 inputs, modes rotating", "[exhaustive][batch]") {
    check<std::uint8_t>(e4m3);
}
TEST_CASE("batch bf16 equals scalar on all 2^32 inputs, modes rotating", "[exhaustive][batch]") {
    check<std::uint16_t>(bf16);
}
TEST_CASE("batch e2m1 equals scalar on all 2^32 inputs, modes rotating", "[exhaustive][batch]") {
    check<std::uint8_t>(e2m1);
}
