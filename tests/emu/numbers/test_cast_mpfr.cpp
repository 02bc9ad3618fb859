// Property: every cast from float32 or float64 into every format, in every deterministic mode,
// saturating or not, with and without flushing subnormals on input and output, equals the MPFR
// oracle (mpfr_set_d + mpfr_subnormalize at the format's precision and range) on at least
// 2.5 * 10^5 inputs per format: all boundaries and midpoints (times 1 +- 2^-40: double rounding
// fails there) plus random ones. The exhaustive label runs 2 * 10^7 more.
#include <catch2/catch.hpp>

#include "emu/numbers/format.hpp"
#include "tests/emu/numbers/cast_mpfr_check.hpp"

using namespace roundscope;

TEST_CASE("casts into every format equal the MPFR oracle on 2.5 * 10^5 inputs x 48 option sets", "[mpfr]") {
    for (const emu::Format& f : emu::all_formats) {
        DYNAMIC_SECTION(f.name) {
            const test::MpfrCheckResult r = test::check_casts_against_mpfr(f, 250'000, 0x5eed0000 + f.bits);
            INFO(r.first_mismatch);
            CHECK(r.checked >= 48 * 250'000);
            REQUIRE(r.mismatches == 0);
        }
    }
}
