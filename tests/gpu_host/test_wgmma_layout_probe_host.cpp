// Property: the wgmma layout probe (gpu/probes/wgmma_layout_probe.hpp), run on the simulated GPU, gives
// the sm_90 wgmma model's D for every case it takes: N 64 and 128; A and B K-major or MN-major,
// or A from registers; no swizzle and each swizzle; K 16 and 64 (four chained wgmmas). What the
// probe then shows on an sm_90 GPU (tests/gpu/test_gpu_mma.cpp) is the hardware's
// reading of each layout. And for E4M3 (m64nNk32): N 64, 128, 160 and 224, K 32 and 64, each
// swizzle that holds K, A K-major or from registers in m16n8k32's fragment; the products are the
// wgmma FP8 model's (one block of 32), not mma.sync's (two blocks of 16, C added after). The cases
// it cannot store are refused with the reason.
#include <catch2/catch.hpp>

#include <vector>

#include "gpu/host/simt_host.hpp"
#include "gpu/probes/wgmma_layout_probe.hpp"
#include "lib/error.hpp"
#include "tests/gpu_host/wgmma_reference.hpp"

using namespace roundscope;
using namespace roundscope::gpu;

namespace {

// D = A B + C by sm_90's mma.sync m16n8k32 FP8 model over each k32 chunk: not wgmma's.
std::vector<float> mma_sync_reference(const test::WgmmaProblem& p) {
    const emu::MmaModel& m = *emu::find_mma_model("sm90", "mma.sync", emu::e4m3, emu::e4m3, emu::f32);
    std::vector<float> d(p.c.size());
    for (int r = 0; r < 64; ++r)
        for (int c = 0; c < p.n; ++c) {
            std::uint32_t acc = bits_of(p.c[static_cast<std::size_t>(r * p.n + c)]);
            for (int k0 = 0; k0 < p.k; k0 += 32)
                acc = emu::mma_dot(m, &p.a[static_cast<std::size_t>(r * p.k + k0)],
                                   &p.b[static_cast<std::size_t>(c * p.k + k0)], 1, 32, acc);
            d[static_cast<std::size_t>(r * p.n + c)] = float_from_bits(acc);
        }
    return d;
}

}  // namespace

TEST_CASE("the wgmma layout probe gives the model's D in every layout", "[gpu-host][wgmma][probe]") {
    simt::set_simulated_architecture("sm90");
    const std::vector<WgmmaLayoutCase> cases = wgmma_layout_cases();
    REQUIRE(cases.size() == 80);
    unsigned seed = 1;
    for (const WgmmaLayoutCase& c : cases) {
        INFO(layout_case_name(c));
        const test::WgmmaProblem p = test::random_wgmma_problem(c.n, c.k, seed++);
        CHECK(test::differing_floats(run_wgmma_layout_probe(c, p.a, p.b, p.c), test::wgmma_reference(p, true)) == 0);
    }
}

TEST_CASE("the wgmma layout probe gives the FP8 model's D in every E4M3 layout", "[gpu-host][wgmma][probe]") {
    simt::set_simulated_architecture("sm90");
    const std::vector<WgmmaLayoutCase> cases = wgmma_e4m3_layout_cases();
    REQUIRE(cases.size() == 72);
    unsigned seed = 100;
    for (const WgmmaLayoutCase& c : cases) {
        INFO(layout_case_name(c));
        const test::WgmmaProblem p = test::random_wgmma_problem_e4m3(c.n, c.k, seed++);
        const std::vector<float> d = run_wgmma_layout_probe(c, p.a, p.b, p.c);
        CHECK(test::differing_floats(d, test::wgmma_reference(p, true)) == 0);
        // negative controls: the bits decoded as E5M2 differ almost everywhere; mma.sync's FP8 model
        // (two blocks of 16, C added last) differs somewhere on every case
        test::WgmmaProblem as_e5m2 = p;
        as_e5m2.input = &emu::e5m2;
        CHECK(test::differing_floats(d, test::wgmma_reference(as_e5m2, true)) > static_cast<std::size_t>(32 * c.n));
        CHECK(test::differing_floats(d, mma_sync_reference(p)) > 0);
    }
}

TEST_CASE("the wgmma layout probe refuses what it cannot store", "[gpu-host][wgmma][probe]") {
    const test::WgmmaProblem p = test::random_wgmma_problem(64, 64, 3);
    CHECK_THROWS_WITH(run_wgmma_layout_probe({64, 64, Major::k, Major::k, false, Swizzle::b32}, p.a, p.b, p.c),
                      Catch::Contains("within its span"));
    CHECK_THROWS_WITH(run_wgmma_layout_probe({32, 16, Major::k, Major::k, false, Swizzle::none}, p.a, p.b, p.c),
                      Catch::Contains("64 or 128"));
    CHECK_THROWS_WITH(run_wgmma_layout_probe({64, 16, Major::k, Major::k, false, Swizzle::none}, p.a, p.b, p.c),
                      Catch::Contains("64 x K"));
    // E4M3: K-major only, K 32 or 64, and K within a swizzled span (64 bytes over 32)
    CHECK_THROWS_WITH(run_wgmma_layout_probe({64, 64, Major::k, Major::mn, false, Swizzle::none, true}, p.a, p.b, p.c),
                      Catch::Contains("K-major"));
    CHECK_THROWS_WITH(run_wgmma_layout_probe({64, 16, Major::k, Major::k, false, Swizzle::none, true}, p.a, p.b, p.c),
                      Catch::Contains("K is 32, 64 or 128"));
    CHECK_THROWS_WITH(run_wgmma_layout_probe({224, 64, Major::k, Major::k, false, Swizzle::b32, true}, p.a, p.b, p.c),
                      Catch::Contains("within its span"));
}
