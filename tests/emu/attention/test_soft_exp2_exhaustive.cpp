// soft_exp2 takes rint(x) as an integer from the bits of x + 1.5 2^23 (emu/attention/math/soft_exp2.hpp)
// instead of converting the rounded float to an integer, and selects its special cases and
// scalings instead of branching. Over all 2^32 float32 inputs its result equals, bit for bit,
// the same polynomial and scaling with the conversion and the branches: neither the integer trick
// nor the selects change an output.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "emu/attention/math/soft_exp2.hpp"
#include "lib/fma_clones.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

// soft_exp2 as it was written: a float-to-int conversion of n, branches for the special cases and
// for detail::times_power_of_two's ranges.
float exp2_converting(float x) {
    namespace a = f32_arith;
    if (x != x) return x;
    if (x >= 128.0f) return float_from_bits(0x7F800000u);
    if (x < -151.0f) return 0.0f;
    const float n = a::sub(a::add(x, detail::round_shift), detail::round_shift);
    return detail::times_power_of_two(detail::exp2_polynomial(a::sub(x, n)), static_cast<int>(n));
}

// The inputs [begin, end) where the two forms differ, and the first of them (the polynomial is
// fused multiply-adds: see fma_clones.hpp).
ROUNDSCOPE_FMA_CLONES std::uint64_t mismatches_in(std::uint64_t begin, std::uint64_t end, std::uint32_t& first) {
    std::uint64_t count = 0;
    for (std::uint64_t b = begin; b < end; ++b) {
        const float x = float_from_bits(static_cast<std::uint32_t>(b));
        if (bits_of(soft_exp2(x)) != bits_of(exp2_converting(x)) && count++ == 0) first = static_cast<std::uint32_t>(b);
    }
    return count;
}

}  // namespace

TEST_CASE("soft_exp2 equals the converting form on every float32 input", "[soft_exp2][exhaustive]") {
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::atomic<std::uint64_t> mismatches{0};
    std::atomic<std::uint32_t> first{0};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            std::uint32_t local_first = 0;
            const std::uint64_t local = mismatches_in((std::uint64_t{1} << 32) * t / threads,
                                                      (std::uint64_t{1} << 32) * (t + 1) / threads, local_first);
            if (local != 0) first = local_first;
            mismatches += local;
        });
    }
    for (std::thread& th : pool) th.join();
    INFO("first differing input bits 0x" << std::hex << first.load());
    CHECK(mismatches.load() == 0);
}
