#include <catch2/catch.hpp>

#include <mpfr.h>

#include <random>

#include "emu/numbers/scaled_value.hpp"

using namespace roundscope;
using namespace roundscope::emu;

// With the product exact, or rounded to odd at 62 bits, one later rounding to a format of up
// to 60 bits is correct (Boldo and Melquiond 2008); this test proves the first half, bit for bit.
TEST_CASE("scaled(x, s) is the exact product, or its truncation at 62 bits with the sticky bit in the last place",
          "[scaled_value]") {
    std::mt19937_64 rng(3);
    mpfr_t exact, value, truncated;
    mpfr_inits2(256, exact, value, truncated, static_cast<mpfr_ptr>(nullptr));
    int rounded = 0;
    for (int i = 0; i < 200000; ++i) {
        const double x = i % 2 ? static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(rng())))
                               : std::bit_cast<double>(rng());
        const double s = std::ldexp(static_cast<double>(rng() >> 11) + 1, static_cast<int>(rng() % 80) - 100);
        const Unpacked u = scaled(unpack(f64, bits_of(x)), unpack(f64, bits_of(s)));
        if (std::isnan(x)) {
            REQUIRE(u.cls == ValueClass::nan);
            continue;
        }
        if (std::isinf(x)) {
            REQUIRE(u.cls == ValueClass::inf);
            continue;
        }
        mpfr_set_d(exact, x, MPFR_RNDN);
        mpfr_mul_d(exact, exact, s, MPFR_RNDN);  // exact at 256 bits
        if (x == 0) {
            REQUIRE(u.cls == ValueClass::zero);
            continue;
        }
        REQUIRE(u.negative == (x < 0));
        mpfr_set_ui_2exp(value, u.m, u.e, MPFR_RNDN);
        mpfr_abs(exact, exact, MPFR_RNDN);
        if (mpfr_equal_p(value, exact)) continue;
        ++rounded;
        // Inexact: m is odd, at most 62 bits, and m - 1 = floor(|product| / 2^e) with the low bit cleared.
        REQUIRE(u.m % 2 == 1);
        REQUIRE(bit_width(u.m) <= 62);
        mpfr_div_2si(truncated, exact, u.e, MPFR_RNDN);
        mpfr_floor(truncated, truncated);
        REQUIRE((mpfr_get_uj(truncated, MPFR_RNDN) | 1) == u.m);
    }
    CHECK(rounded > 50000);
    mpfr_clears(exact, value, truncated, static_cast<mpfr_ptr>(nullptr));
}

TEST_CASE("scaled follows IEEE special cases", "[scaled_value]") {
    auto u = [](double v) { return unpack(f64, bits_of(v)); };
    CHECK(scaled(u(INFINITY), u(0.0)).cls == ValueClass::nan);
    CHECK(scaled(u(-INFINITY), u(2.0)).cls == ValueClass::inf);
    CHECK(scaled(u(-INFINITY), u(2.0)).negative);
    CHECK(scaled(u(-0.0), u(3.0)).cls == ValueClass::zero);
    CHECK(scaled(u(-0.0), u(3.0)).negative);
    CHECK(scaled(u(NAN), u(1.0)).cls == ValueClass::nan);
}
