#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "emu/batch/batch_cast.hpp"
#include "emu/numbers/representable.hpp"
#include "emu/numbers/round.hpp"
#include "emu/numbers/unpack.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

// The definition: x survives a round trip through f (nearest-even, no saturation, so values
// beyond the range become Inf or NaN and fail the comparison).
bool survives_round_trip(double x, const Format& f) {
    if (!std::isfinite(x)) return false;
    const double back = decode(f, cast_from_f64(x, f, CastOptions{}));
    return back == x;
}

bool expected(double x, const Format& f) {
    // MXINT8 casts clamp to +-127 (OCP MX v1.0 5.4), yet -128 * 2^-6 = -2 is a value of the format.
    if (f.encoding == Encoding::int8 && x == -2.0) return true;
    return survives_round_trip(x, f);
}

}  // namespace

TEST_CASE("is_representable equals the round-trip test on every value of every format up to 16 bits",
          "[representable]") {
    std::uint64_t checked = 0;
    for (const Format& from : all_formats) {
        if (from.bits > 16) continue;
        for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << from.bits); ++bits) {
            const double x = decode(from, bits);
            // Neighbours one f64 ulp away are representable in none of the narrow formats.
            for (double y : {x, std::nextafter(x, INFINITY), std::nextafter(x, -INFINITY)}) {
                for (const Format& to : all_formats) {
                    if (to.bits == 64) continue;
                    INFO(from.name << " bits " << bits << " -> " << to.name << " x=" << y);
                    REQUIRE(is_representable(y, to) == expected(y, to));
                    ++checked;
                }
            }
        }
    }
    CHECK(checked > 5'000'000);
}

TEST_CASE("is_representable equals the round-trip test on random doubles across every range", "[representable]") {
    std::mt19937_64 rng(7);
    for (int i = 0; i < 300000; ++i) {
        // Short significands at every exponent, so that many are representable somewhere.
        const int width = 1 + static_cast<int>(rng() % 26);
        const double m = static_cast<double>(rng() >> (64 - width));
        const double x = std::ldexp(rng() & 1 ? -m : m, static_cast<int>(rng() % 320) - 180);
        for (const Format& to : all_formats) {
            if (to.bits == 64) continue;
            INFO(to.name << " x=" << x);
            REQUIRE(is_representable(x, to) == expected(x, to));
        }
    }
}
