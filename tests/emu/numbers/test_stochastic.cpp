// Stochastic rounding: the round-up frequency over 10^6 independent streams matches the exact
// probability within 5 sigma; results do not depend on the thread count or on how a batch is
// split.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "emu/batch/batch_cast.hpp"
#include "emu/numbers/round.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

struct Case {
    double x;
    const Format* to;
    std::uint64_t down_bits;  // the neighbour toward zero; the other is down_bits + 1
};

/// (|x| - |down|) / (|up| - |down|): exact in binary64 for these cases.
double exact_probability(const Case& c) {
    const double down = std::fabs(decode(*c.to, c.down_bits)), up = std::fabs(decode(*c.to, c.down_bits + 1));
    return (std::fabs(c.x) - down) / (up - down);
}

void check_frequency(const Case& c, const CastOptions& o, double p_up) {
    const int n = 1'000'000;
    int ups = 0;
    for (int i = 0; i < n; ++i) {
        const std::uint64_t b = cast_from_f64(c.x, *c.to, o, static_cast<std::uint64_t>(i));
        REQUIRE((b == c.down_bits || b == c.down_bits + 1));
        ups += b != c.down_bits;
    }
    const double mean = n * p_up, sigma = std::sqrt(n * p_up * (1 - p_up));
    INFO(c.to->name << " x=" << c.x << ": expected " << mean << " +- " << sigma << " ups, got " << ups);
    CHECK(std::fabs(ups - mean) <= 5 * sigma);
}

const Case cases[] = {
    {1 + 0x1p-9, &bf16, 0x3F80},                // a quarter ulp
    {1 + 0x1p-7 / 3, &bf16, 0x3F80},            // a third (its binary64 value)
    {-(1 + 0x1p-7 * 0.75), &bf16, 0xBF80},      // negative: the magnitude rounds up
    {1.5 + 0.5 * (0.5 + 0x1p-45), &e2m1, 0x3},  // the fraction needs more than 32 random bits
    {0x1p-9 * 0.1, &e4m3, 0x00},                // below the smallest subnormal
    {0.0078125 * 0.999, &int8, 0x00},           // fixed point
    {1 + 0x1p-23 * 0.999, &f32, 0x3F800000},    // float64 -> float32
};

}  // namespace

TEST_CASE("exact stochastic rounding rounds up with probability (x - down) / ulp", "[stochastic]") {
    CastOptions o;
    o.mode = RoundingMode::stochastic_exact;
    o.seed = 42;
    for (const Case& c : cases) check_frequency(c, o, exact_probability(c));
}

TEST_CASE("stochastic rounding with N random bits rounds up with probability floor(p * 2^N) / 2^N", "[stochastic]") {
    CastOptions o;
    o.mode = RoundingMode::stochastic_bits;
    o.seed = 7;
    for (int n : {1, 3, 8, 23}) {
        o.sr_bits = n;
        for (const Case& c : cases)
            check_frequency(c, o, std::floor(std::ldexp(exact_probability(c), n)) / std::ldexp(1.0, n));
    }
}

TEST_CASE("stochastic batches give the same bits on 1 and N threads and when split", "[stochastic]") {
    std::vector<float> in(300'001);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = std::ldexp(1.0f + i * 0x1p-20f, static_cast<int>(i % 40) - 20);
    for (const char* mode : {"sr", "sr:5"}) {
        CastOptions o;
        parse_rounding_mode(mode, o);
        o.seed = 0xfeed;
        std::vector<std::uint8_t> one(in.size()), many(in.size()), split(in.size());
        cast_batch(std::span<const float>(in), e4m3, o, std::span<std::uint8_t>(one), {0, 1});
        cast_batch(std::span<const float>(in), e4m3, o, std::span<std::uint8_t>(many), {0, 0});
        const std::size_t cut = 12345;
        cast_batch(std::span<const float>(in).first(cut), e4m3, o, std::span<std::uint8_t>(split).first(cut), {0, 2});
        cast_batch(std::span<const float>(in).subspan(cut), e4m3, o, std::span<std::uint8_t>(split).subspan(cut),
                   {cut, 2});
        CHECK(one == many);
        CHECK(one == split);
        for (std::size_t i = 0; i < in.size(); i += 997) REQUIRE(one[i] == cast_from_f32(in[i], e4m3, o, i));
    }
}
