// rounded_value's spacing rule (round.hpp) against the cast it stands in for: decode of
// cast_from_f64, round_to_format's integer rule. Every value of f16, bf16 and e5m2, each
// midpoint between neighbours and the doubles one and two ulps either side, both signs; the
// overflow boundary; float32's midpoints at every exponent; and random doubles across and
// beyond every format's range. One wrong bit anywhere fails.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "emu/numbers/round.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

double by_cast(double x, const Format& f) { return decode(f, cast_from_f64(x, f, CastOptions{})); }

// The same double, bit for bit (NaN never reaches here; -0 and +0 differ).
bool same(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

void check_around(double x, const Format& f) {
    double y = x;
    for (int step = 0; step < 3; ++step, y = std::nextafter(y, -INFINITY))
        for (const double v : {y, -y}) REQUIRE(same(rounded_value(v, f), by_cast(v, f)));
    y = x;
    for (int step = 0; step < 3; ++step, y = std::nextafter(y, INFINITY))
        for (const double v : {y, -y}) REQUIRE(same(rounded_value(v, f), by_cast(v, f)));
}

}  // namespace

TEST_CASE("rounded_value equals the cast at every value and midpoint of f16, bf16 and e5m2", "[round]") {
    for (const Format* f : {&f16, &bf16, &e5m2}) {
        DYNAMIC_SECTION(f->name) {
            std::vector<double> values;
            for (std::uint64_t b = 0; b < (std::uint64_t{1} << f->bits); ++b) {
                const double v = decode(*f, b);
                if (std::isfinite(v) && v >= 0) values.push_back(v);
            }
            std::sort(values.begin(), values.end());
            const double largest = values.back();
            values.push_back(largest + (largest - values[values.size() - 2]));  // the next binade's first
            for (std::size_t k = 0; k < values.size(); ++k) {
                check_around(values[k], *f);
                if (k > 0) check_around(values[k - 1] + (values[k] - values[k - 1]) / 2, *f);
            }
        }
    }
}

TEST_CASE("rounded_value equals the cast at float32's midpoints and overflow boundary", "[round]") {
    for (int e = -149; e <= 127; ++e) {
        for (const std::uint32_t m : {0u, 1u, 2u, 3u, 0x400000u, 0x7FFFFEu, 0x7FFFFFu, 0x2AAAAAu}) {
            const double ulp = std::ldexp(1.0, std::max(e, -126) - 23);
            const double v = e < -126 ? std::ldexp(static_cast<double>(m), -149)
                                      : std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -23), e);
            check_around(v, f32);
            check_around(v + ulp / 2, f32);
        }
    }
    check_around(std::ldexp(2.0 - 0x1p-24, 127), f32);  // largest + half an ulp: Inf
    check_around(std::ldexp(1.0, 128), f32);
}

TEST_CASE("rounded_value equals the cast on random doubles across and beyond every range", "[round]") {
    std::mt19937_64 rng(20261126);
    std::uniform_int_distribution<int> exponent(-1100, 1100);
    std::uniform_int_distribution<std::uint64_t> fraction(0, (std::uint64_t{1} << 52) - 1);
    for (const Format* f : {&f32, &f16, &bf16, &e5m2, &e4m3, &e2m1}) {
        DYNAMIC_SECTION(f->name) {
            for (int i = 0; i < 200000; ++i) {
                // Exponents mostly near the format's range, some anywhere (subnormal doubles too).
                const int e = i % 4 == 0 ? exponent(rng) : exponent(rng) % 160;
                const double x = std::ldexp(1.0 + std::ldexp(static_cast<double>(fraction(rng)), -52), e);
                // Few fraction bits as well: ties and exact values.
                const double tie = std::ldexp(std::round(std::ldexp(x, 30 - std::ilogb(x))), std::ilogb(x) - 30);
                for (const double v : {x, -x, tie, -tie}) REQUIRE(same(rounded_value(v, *f), by_cast(v, *f)));
            }
            for (const double v : {0.0, -0.0, 0x1p-1074, -0x1p-1074, 0x1p-1022, 0x1.fffffffffffffp1023})
                REQUIRE(same(rounded_value(v, *f), by_cast(v, *f)));
            const double nan = rounded_value(NAN, *f);  // FP4 has no NaN: the cast's choice
            REQUIRE((std::isnan(nan) ? std::isnan(by_cast(NAN, *f)) : same(nan, by_cast(NAN, *f))));
            REQUIRE(same(rounded_value(INFINITY, *f), by_cast(INFINITY, *f)));
        }
    }
}
