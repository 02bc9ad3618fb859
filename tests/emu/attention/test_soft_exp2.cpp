// The shared software exp2 and log2 (emu/attention/math/soft_exp2.hpp): within a few ulps of the exact
// function everywhere (measured against double-precision exp2/log2, whose own error is 2^29
// times smaller than a float32 ulp), exact where it must be (powers of two, 2^0 = 1), and the
// special values right.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "emu/attention/math/soft_exp2.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

// |got - exact| in units of the float32 ulp at the exact value (subnormal spacing below 2^-126).
double ulps(float got, double exact) {
    const double e = std::fabs(exact);
    const int exponent = e < 0x1p-126 ? -126 : std::ilogb(e);
    return std::fabs(static_cast<double>(got) - exact) / std::ldexp(1.0, exponent - 23);
}

}  // namespace

TEST_CASE("soft_exp2 is within 2 ulps of 2^x from -151 up to 128, sampled every 2^6th float", "[soft_exp2]") {
    double worst = 0;
    float worst_x = 0;
    for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += 61) {  // 70 million floats
        const float x = float_from_bits(static_cast<std::uint32_t>(bits));
        if (!(x > -151.0f && x < 128.0f)) continue;
        const double exact = std::exp2(static_cast<double>(x));
        if (exact >= 0x1p128) continue;  // overflows: checked below
        const double e = ulps(soft_exp2(x), exact);
        if (e > worst) worst = e, worst_x = x;
    }
    INFO("worst " << worst << " ulps at x = " << worst_x);
    CHECK(worst <= 2.0);
}

TEST_CASE("soft_exp2 is exact at integers, 1 at 0, and right at the edges", "[soft_exp2]") {
    for (int k = -149; k <= 127; ++k) CHECK(soft_exp2(static_cast<float>(k)) == std::ldexp(1.0f, k));
    CHECK(soft_exp2(0.0f) == 1.0f);
    CHECK(soft_exp2(-0.0f) == 1.0f);
    CHECK(soft_exp2(-std::numeric_limits<float>::infinity()) == 0.0f);
    CHECK(soft_exp2(-200.0f) == 0.0f);
    CHECK(std::isinf(soft_exp2(128.0f)));
    CHECK(std::isinf(soft_exp2(std::numeric_limits<float>::infinity())));
    CHECK(std::isnan(soft_exp2(std::numeric_limits<float>::quiet_NaN())));
    const float below_128 = std::nextafter(128.0f, 0.0f);
    CHECK(std::isfinite(soft_exp2(below_128)));
    CHECK(ulps(soft_exp2(below_128), std::exp2(static_cast<double>(below_128))) <= 2.0);
    CHECK(soft_exp2(-150.5f) == 0.0f);       // 0.35 times the least subnormal: rounds to zero
    CHECK(soft_exp2(-149.5f) == 0x1p-149f);  // 0.71 times it: one rounding, up
}

TEST_CASE("soft_log2 is within 4 ulps (or 2^-23 absolute near 1) of log2 x for every positive float, sampled",
          "[soft_exp2]") {
    double worst = 0;
    for (std::uint32_t bits = 1; bits < 0x7F800000u; bits += 37) {
        const float x = float_from_bits(bits);
        const double exact = std::log2(static_cast<double>(x));
        const double error = std::fabs(static_cast<double>(soft_log2(x)) - exact);
        // near x = 1 the result is small and the error is absolute: t is rounded once
        const double allowed = std::max(4 * std::ldexp(1.0, std::ilogb(std::fabs(exact) + 0x1p-126) - 23), 0x1p-23);
        worst = std::max(worst, error / allowed);
    }
    CHECK(worst <= 1.0);
    for (int k = -149; k <= 127; ++k) CHECK(soft_log2(std::ldexp(1.0f, k)) == static_cast<float>(k));
    CHECK(soft_log2(0.0f) == -std::numeric_limits<float>::infinity());
    CHECK(std::isnan(soft_log2(-1.0f)));
    CHECK(soft_log2(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
}
