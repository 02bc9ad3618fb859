// The long run of the MPFR comparison (label `exhaustive`): 2 * 10^7 inputs in all (or
// $ROUNDSCOPE_MPFR_INPUTS), over the 14 formats, each in 48 option sets (every deterministic mode
// x saturation x flush on input x flush on output), 9.6 * 10^8 casts checked. CI's 20-minute
// budget sets the default; the 10^8 run (ROUNDSCOPE_MPFR_INPUTS=100000000) takes 4 CPU-minutes.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "emu/numbers/format.hpp"
#include "tests/emu/numbers/cast_mpfr_check.hpp"

using namespace roundscope;

TEST_CASE("casts into every format equal the MPFR oracle on 2 * 10^7 inputs", "[mpfr][exhaustive]") {
    const char* inputs = std::getenv("ROUNDSCOPE_MPFR_INPUTS");
    const std::size_t total = inputs != nullptr ? std::strtoull(inputs, nullptr, 10) : 20'000'000;
    const std::size_t per_format = total / std::size(emu::all_formats) + 1;
    for (const emu::Format& f : emu::all_formats) {
        DYNAMIC_SECTION(f.name) {
            const test::MpfrCheckResult r = test::check_casts_against_mpfr(f, per_format, 0xe4a0000 + f.bits);
            INFO(r.first_mismatch);
            CHECK(r.checked >= 48 * per_format);
            REQUIRE(r.mismatches == 0);
        }
    }
}
