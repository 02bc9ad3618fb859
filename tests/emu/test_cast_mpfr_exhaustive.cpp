// The long run of the MPFR comparison (label `exhaustive`): 10^8 inputs in all, over the 14
// formats, each in 48 option sets (every deterministic mode x saturation x flush on input x
// flush on output), 4.8 * 10^9 casts checked.
#include <catch2/catch.hpp>

#include "emu/format.hpp"
#include "tests/emu/cast_mpfr_check.hpp"

using namespace roundscope;

TEST_CASE("casts into every format equal the MPFR oracle on 10^8 inputs", "[mpfr][exhaustive]") {
    const std::size_t per_format = 100'000'000 / std::size(emu::all_formats) + 1;
    for (const emu::Format& f : emu::all_formats) {
        DYNAMIC_SECTION(f.name) {
            const test::MpfrCheckResult r = test::check_casts_against_mpfr(f, per_format, 0xe4a0000 + f.bits);
            INFO(r.first_mismatch);
            CHECK(r.checked >= 48 * per_format);
            REQUIRE(r.mismatches == 0);
        }
    }
}
