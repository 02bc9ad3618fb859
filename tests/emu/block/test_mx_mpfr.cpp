// Property: every MX element format under every scale rule quantizes random blocks to the MPFR
// reference's scale and elements, bit for bit (the fast loop's share; the exhaustive label runs
// 10^6 blocks each, of which these are the first).
#include <catch2/catch.hpp>

#include "tests/emu/block/mx_mpfr_check.hpp"

using namespace roundscope;
using namespace roundscope::emu;

TEST_CASE("MX blocks equal an MPFR reference bit for bit: every element format x scale rule, 2 * 10^5 blocks each", "[mx]") {
    for (const Format* f : {&e4m3, &e5m2, &e2m3, &e3m2, &e2m1, &int8}) {
        for (ScaleRule rule : all_scale_rules) {
            INFO(f->name << " " << scale_rule_name(rule));
            CHECK(test::mx_blocks_mismatching_mpfr(*f, rule, 200'000) == 0);
        }
    }
}
