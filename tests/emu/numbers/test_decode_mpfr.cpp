// Property: every bit pattern of every format of 16 bits or fewer decodes to the value the
// spec's formula gives (computed with MPFR), NaN to NaN, and zeros keep their sign.
#include <catch2/catch.hpp>

#include <cmath>

#include <fmt/core.h>

#include "emu/numbers/unpack.hpp"
#include "tests/emu/numbers/mpfr_oracle.hpp"

using namespace roundscope;

TEST_CASE("every pattern of every format of <= 16 bits decodes to the spec's value", "[mpfr][decode]") {
    for (const emu::Format& f : emu::all_formats) {
        if (f.bits > 16) continue;
        DYNAMIC_SECTION(f.name) {
            std::uint64_t bad = 0;
            std::string first;
            for (std::uint64_t b = 0; b < (std::uint64_t{1} << f.bits); ++b) {
                const test::OracleResult want = test::oracle_decode(f, b);
                if (!test::same_result(f, b, want) && bad++ == 0)
                    first = fmt::format("0x{:x}: emu {} spec {}", b, emu::decode(f, b), want.value);
            }
            INFO(first);
            REQUIRE(bad == 0);
        }
    }
}
