// The emulator's H100 MUFU on all 2^32 inputs of ex2.approx.ftz.f32, ex2.approx.f32 (through
// CUDA's exp2f guard), lg2.approx.ftz.f32, lg2.approx.f32 (through its subnormal scaling) and
// rcp.approx.ftz.f32: every one of the 65,536 chunk digests of the hardware's capture.
#include <catch2/catch.hpp>

#include "emu/mufu/mufu_digest.hpp"
#include "tests/emu/mufu/h100_captures.hpp"

using namespace roundscope;
using emu::MufuVariant;

TEST_CASE("The H100 MUFU model is bit-exact on all 2^32 inputs of each variant", "[mufu][exhaustive]") {
    const MufuVariant v =
        GENERATE(MufuVariant::ex2_ftz, MufuVariant::ex2, MufuVariant::lg2_ftz, MufuVariant::lg2, MufuVariant::rcp_ftz);
    const gpu::MufuCapture c = test::h100_capture(v);
    const std::vector<std::uint64_t> mine = emu::digests_of([v](std::uint32_t x) { return test::emulated(v, x); }, 0);
    std::size_t bad = 0;
    for (std::size_t j = 0; j < emu::mufu_chunks; ++j) bad += mine[j] != c.digests[j];
    INFO(emu::mufu_ptx(v));
    CHECK(bad == 0);
}
