// Property: the long run of the MPFR comparison of MX blocks (label `exhaustive`): 10^6 random
// blocks per element format and scale rule.
#include <catch2/catch.hpp>

#include "tests/emu/block/mx_mpfr_check.hpp"

using namespace roundscope;
using namespace roundscope::emu;

TEST_CASE("MX blocks equal an MPFR reference bit for bit: every element format x scale rule, 10^6 blocks each", "[mx][exhaustive]") {
    for (const Format* f : {&e4m3, &e5m2, &e2m3, &e3m2, &e2m1, &int8}) {
        for (ScaleRule rule : all_scale_rules) {
            INFO(f->name << " " << scale_rule_name(rule));
            CHECK(test::mx_blocks_mismatching_mpfr(*f, rule, 1'000'000) == 0);
        }
    }
}
