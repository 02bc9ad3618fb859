// Property: the wgmma layout probe (gpu/probes/wgmma_layout_probe.hpp), run on the simulated GPU, gives
// the sm_90 wgmma model's D for every case it takes: N 64 and 128; A and B K-major or MN-major,
// or A from registers; no swizzle and each swizzle; K 16 and 64 (four chained wgmmas). What the
// probe then shows on an sm_90 GPU (tests/gpu/test_gpu_mma.cpp) is the hardware's
// reading of each layout. The cases it cannot store are refused with the reason.
#include <catch2/catch.hpp>

#include <vector>

#include "gpu/host/simt_host.hpp"
#include "gpu/probes/wgmma_layout_probe.hpp"
#include "lib/error.hpp"
#include "tests/gpu_host/wgmma_reference.hpp"

using namespace roundscope;
using namespace roundscope::gpu;

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

TEST_CASE("the wgmma layout probe refuses what it cannot store", "[gpu-host][wgmma][probe]") {
    const test::WgmmaProblem p = test::random_wgmma_problem(64, 64, 3);
    CHECK_THROWS_WITH(run_wgmma_layout_probe({64, 64, Major::k, Major::k, false, Swizzle::b32}, p.a, p.b, p.c),
                      Catch::Contains("within its span"));
    CHECK_THROWS_WITH(run_wgmma_layout_probe({32, 16, Major::k, Major::k, false, Swizzle::none}, p.a, p.b, p.c),
                      Catch::Contains("64 or 128"));
    CHECK_THROWS_WITH(run_wgmma_layout_probe({64, 16, Major::k, Major::k, false, Swizzle::none}, p.a, p.b, p.c),
                      Catch::Contains("64 x K"));
}
