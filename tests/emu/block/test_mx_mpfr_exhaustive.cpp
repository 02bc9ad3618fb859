// Property: the long run of the MPFR comparison of MX blocks (label `exhaustive`): 10^6 random
// blocks per element format and scale rule.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/emu/block/mx_mpfr_check.hpp"

using namespace roundscope;

TEST_CASE("MX blocks equal an MPFR reference bit for bit: every element format x scale rule, 10^6 blocks each",
          "[mx][exhaustive]") {
    CHECK(test::mx_mismatches_every_format_and_rule(1'000'000) == std::vector<std::string>{});
}
