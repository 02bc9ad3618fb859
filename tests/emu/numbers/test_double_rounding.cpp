// Property: float64 inputs are rounded once, directly. Just above or below a midpoint of the
// target grid (midpoint * (1 +- 2^-40)) the result is the upper or lower neighbour; a cast
// through float32 first would land on the midpoint and round it to even, the double-rounding
// bug found in a well-known C++ library.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "emu/numbers/round.hpp"

using namespace roundscope;
using namespace roundscope::emu;

TEST_CASE("f64 inputs near every midpoint of every format of <= 16 bits round to the right neighbour",
          "[double-rounding]") {
    const CastOptions rne{};
    for (const Format& f : all_formats) {
        if (f.bits > 16 || !f.is_signed) continue;
        DYNAMIC_SECTION(f.name) {
            std::vector<std::uint64_t> patterns;
            for (std::uint64_t b = 0; b < (std::uint64_t{1} << f.bits); ++b) {
                const double v = decode(f, b);
                if (std::isfinite(v) && v > 0) patterns.push_back(b);
            }
            std::sort(patterns.begin(), patterns.end(), [&](auto a, auto b) { return decode(f, a) < decode(f, b); });
            for (std::size_t k = 1; k < patterns.size(); ++k) {
                const double lo = decode(f, patterns[k - 1]), hi = decode(f, patterns[k]);
                const double mid = lo + (hi - lo) / 2;
                REQUIRE(cast_from_f64(mid * (1 + 0x1p-40), f, rne) == patterns[k]);
                REQUIRE(cast_from_f64(mid * (1 - 0x1p-40), f, rne) == patterns[k - 1]);
                REQUIRE(decode(f, cast_from_f64(-mid * (1 + 0x1p-40), f, rne)) == -hi);
            }
        }
    }
}

TEST_CASE("f64 -> f32 near float32 midpoints rounds once", "[double-rounding]") {
    std::mt19937 rng(7);
    const CastOptions rne{};
    for (int i = 0; i < 100000; ++i) {
        const std::uint32_t b = rng() & 0x7F7FFFFEu;  // finite, not the largest
        const double lo = float_from_bits(b), hi = float_from_bits(b + 1);
        const double mid = lo + (hi - lo) / 2;
        REQUIRE(cast_from_f64(mid * (1 + 0x1p-40), f32, rne) == b + 1);
        REQUIRE(cast_from_f64(mid * (1 - 0x1p-40), f32, rne) == b);
    }
}
