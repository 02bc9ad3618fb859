// Property: a conversion-digest golden file passes when its GPU digests are the emulated
// conversion's and fails on exactly the chunks that differ, naming the first. Each check sweeps
// all 2^32 float32 inputs, so this runs with the exhaustive tests.
#include <catch2/catch.hpp>

#include "analysis/golden_check.hpp"
#include "emu/batch/conversion_digest.hpp"
#include "tests/analysis/digest_file.hpp"

using namespace roundscope;
using namespace roundscope::analysis;

using test::digest_file;

TEST_CASE("conversion digests pass when they are the emulator's and fail chunk by chunk", "[golden]") {
    const std::vector<std::uint64_t> emulated =
        emu::emulated_conversion_digests(emu::e4m3, emu::probed_conversion_options(emu::e4m3));
    TensorFile same = digest_file(emulated);
    REQUIRE(golden_kind(same) == GoldenKind::conversion_digests);
    validate_golden(same, GoldenKind::conversion_digests);
    const std::vector<GoldenCase> pass = check_golden(same, GoldenKind::conversion_digests);
    REQUIRE(pass.size() == 1);
    CHECK(pass[0].name == "f32 -> e4m3");
    CHECK((pass[0].passed && pass[0].matched == 256 && pass[0].total == 256));

    std::vector<std::uint64_t> changed = emulated;
    changed[200] += 1;
    changed[17] ^= 1;
    const std::vector<GoldenCase> fail = check_golden(digest_file(changed), GoldenKind::conversion_digests);
    CHECK((!fail[0].passed && fail[0].matched == 254));
    CHECK(fail[0].detail == "first differing chunk: inputs 0x11000000 to 0x11ffffff");
}
