// Property: every MX element format under every scale rule quantizes random blocks to the MPFR
// reference's scale and elements, bit for bit (the fast loop's share; the exhaustive label runs
// 10^6 blocks each, of which these are the first).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/emu/block/mx_mpfr_check.hpp"

using namespace roundscope;

TEST_CASE("MX blocks equal an MPFR reference bit for bit: every element format x scale rule, 2 * 10^5 blocks each",
          "[mx]") {
    CHECK(test::mx_mismatches_every_format_and_rule(200'000) == std::vector<std::string>{});
}
