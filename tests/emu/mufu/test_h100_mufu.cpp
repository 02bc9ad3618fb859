// The emulator's H100 MUFU (emu/mufu/h100_mufu.hpp) against the hardware's capture: every raw
// window output and a spread of chunk digests here; all 2^32 inputs in
// test_h100_mufu_exhaustive.cpp. Also the pack's hostile inputs, and that one wrong table bit fails.
#include <catch2/catch.hpp>

#include <cstring>

#include "emu/batch/conversion_digest.hpp"
#include "emu/mufu/mufu_pack.hpp"
#include "lib/error.hpp"
#include "tests/emu/mufu/h100_captures.hpp"

using namespace roundscope;
using emu::MufuVariant;

namespace {

std::size_t window_mismatches(MufuVariant v, const gpu::MufuCapture& c) {
    std::size_t bad = 0;
    for (const gpu::MufuCapturedWindow& w : c.windows)
        for (std::size_t j = 0; j < w.outputs.size(); ++j)
            bad += test::emulated(v, w.first + static_cast<std::uint32_t>(j)) != w.outputs[j];
    return bad;
}

std::uint64_t chunk_digest(MufuVariant v, std::size_t chunk) {
    std::uint64_t sum = 0;
    for (std::uint32_t i = 0; i < (1u << emu::mufu_chunk_bits); ++i) {
        const auto x = static_cast<std::uint32_t>(chunk << emu::mufu_chunk_bits) + i;
        sum += emu::conversion_mix(x, test::emulated(v, x));
    }
    return sum;
}

}  // namespace

TEST_CASE("The H100 MUFU model reproduces every raw window and a spread of chunks of the capture", "[mufu]") {
    const MufuVariant v =
        GENERATE(MufuVariant::ex2_ftz, MufuVariant::ex2, MufuVariant::lg2_ftz, MufuVariant::lg2, MufuVariant::rcp_ftz);
    const gpu::MufuCapture c = test::h100_capture(v);
    INFO(emu::mufu_ptx(v) << " on " << c.metadata.at("device"));
    REQUIRE(c.metadata.at("unit") == "hardware");
    CHECK(window_mismatches(v, c) == 0);
    // 97 chunks: both signs, every exponent step of 11, the NaNs, the subnormals.
    std::size_t checked = 0, bad = 0;
    for (std::size_t chunk = 0; chunk < emu::mufu_chunks; chunk += 677, ++checked)
        bad += chunk_digest(v, chunk) != c.digests[chunk];
    for (const std::size_t chunk : {std::size_t{0x0000}, std::size_t{0x0040}, std::size_t{0x7F81}, std::size_t{0x8000},
                                    std::size_t{0xFF81}, std::size_t{0x3F80}, std::size_t{0xC2FF}})
        bad += chunk_digest(v, chunk) != c.digests[chunk], ++checked;
    INFO(checked << " chunks checked");
    CHECK(bad == 0);
}

TEST_CASE("One wrong bit in the H100 exp2 table fails the window check", "[mufu]") {
    emu::MufuModel broken = emu::h100_mufu(MufuVariant::ex2_ftz);
    const gpu::MufuCapture c = test::h100_capture(MufuVariant::ex2_ftz);
    broken.table_positive[12345] ^= 1u;  // x = 1 + 12345 2^-23 is in the window [1, 2)
    std::size_t bad = 0;
    for (const gpu::MufuCapturedWindow& w : c.windows)
        for (std::size_t j = 0; j < w.outputs.size(); ++j)
            bad += broken(w.first + static_cast<std::uint32_t>(j)) != w.outputs[j];
    CHECK(bad == 1);
}

TEST_CASE("The built-in pack says where it comes from and refuses a damaged copy", "[mufu]") {
    const auto& p = emu::h100_mufu_provenance();
    CHECK(p.at("device") == "NVIDIA H100 80GB HBM3");
    CHECK(p.at("compute_capability") == "90");
    CHECK_THROWS_AS(emu::h100_mufu(MufuVariant::ex2), Error);  // a guard around ex2_ftz, not a unit of its own

    emu::MufuPack one;
    one.models.push_back(emu::h100_mufu(MufuVariant::lg2_ftz));
    std::vector<unsigned char> bytes = emu::pack_mufu_models(one);
    const emu::MufuPack back = emu::unpack_mufu_models(bytes.data(), bytes.size());
    REQUIRE(back.models.size() == 1);
    CHECK(back.models[0].table == one.models[0].table);
    CHECK(back.models[0].split == one.models[0].split);
    CHECK(back.models[0].at_one == one.models[0].at_one);
    CHECK_THROWS_WITH(emu::unpack_mufu_models(bytes.data(), bytes.size() / 2), Catch::Contains("truncated"));
    CHECK_THROWS_WITH(emu::unpack_mufu_models(bytes.data(), 4), Catch::Contains("bad magic"));
    std::vector<unsigned char> corrupt = bytes;
    corrupt[corrupt.size() - 100] ^= 0xFF;  // inside the zlib stream
    CHECK_THROWS_AS(emu::unpack_mufu_models(corrupt.data(), corrupt.size()), Error);
    std::vector<unsigned char> longer = bytes;
    longer.push_back(0);
    CHECK_THROWS_WITH(emu::unpack_mufu_models(longer.data(), longer.size()), Catch::Contains("after the last"));
}
