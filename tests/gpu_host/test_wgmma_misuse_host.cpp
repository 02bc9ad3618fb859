// Property: the simulated warpgroup fails a kernel that misuses wgmma the way the GPU would
// suffer it silently (gpu/host/simt_wgmma.hpp), whatever the host threads' timing: a wgmma with no
// wgmma.fence since the thread's last wait_group, a wait with wgmmas not committed, a thread that
// ends with wgmmas in flight, accumulators written while their wgmma is in flight, a shared
// operand changed before the wgmma completes, and a buffer released by an mbarrier arrival
// before wgmma.wait_group and then reloaded by TMA. Each misuse is a negative control beside the
// same kernel written correctly, which runs.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/host/simt_host.hpp"
#include "gpu/host/simt_tma.hpp"
#include "gpu/primitives/sync.hpp"
#include "gpu/primitives/tma.hpp"
#include "gpu/primitives/wgmma.hpp"
#include "gpu/probes/wgmma_layout_probe.hpp"
#include "lib/error.hpp"

using namespace roundscope;
using namespace roundscope::gpu;
using Catch::Matchers::Contains;

namespace {

constexpr std::uint32_t a_at = 1024, b_at = 3072;  // A 64 x 16 and B 8 x 16, K-major, no swizzle

std::uint64_t descriptor(std::uint32_t at) {
    return encode_descriptor(probe_layout(Major::k, at, 16, Swizzle::none, 0));
}

enum class Misuse { none, no_fence, no_fence_after_wait, no_commit, no_wait, write_accumulator, write_operand };

// One warpgroup's two rounds of D = A B (m64n8k16), the second adding to the first, with `misuse`;
// the simulated GPU's error, empty if it ran.
std::string run_two_rounds(Misuse misuse) {
    try {
        simt::run_grid(dim3(1), dim3(128), 4096, [&] {
            std::byte* shared = shared_memory<std::byte>();
            if (threadIdx.x == 0) std::memset(shared, 0, 4096);
            sync_threads();
            float acc[4] = {0, 0, 0, 0};
            if (misuse != Misuse::no_fence) wgmma_fence();
            wgmma_bf16_ss<8>(acc, descriptor(a_at), descriptor(b_at), false);
            wgmma_commit_group();
            wgmma_wait_group<0>();
            if (misuse != Misuse::no_fence_after_wait) wgmma_fence();
            wgmma_bf16_ss<8>(acc, descriptor(a_at), descriptor(b_at), true);
            if (misuse == Misuse::write_accumulator) acc[1] = 1.0f;
            if (misuse == Misuse::write_operand) {
                sync_threads();
                if (threadIdx.x == 0)
                    for (std::uint32_t i = 0; i < 256; i += 2) std::memcpy(shared + b_at + i, "\x80\x3f", 2);
                sync_threads();
            }
            if (misuse != Misuse::no_commit) wgmma_commit_group();
            if (misuse != Misuse::no_wait) wgmma_wait_group<0>();
        });
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// How the consumers release the buffer: after their wait_group; before it (early); or before it
// on `empty` and after it on a second barrier `done` the producer also waits for before it reloads
// (FlashAttention-3's pipelining releases K while P V still reads V, whose own barrier comes later).
enum class Release { after_wait, early, early_then_ordered };

// A producer warp (threads 128-159) loads B by TMA into one buffer twice, the second time after
// the consumer warpgroup (threads 0-127) releases it.
std::string run_ring(Release release) {
    const bool early = release != Release::after_wait;
    std::vector<std::uint16_t> global(8 * 16, 0);
    const TmaMap map =
        simt::make_tma_map(reinterpret_cast<std::byte*>(global.data()), 2, 16, 8, 32, 16, 8, Swizzle::none);
    try {
        simt::run_grid(dim3(1), dim3(160), 4096, [&] {
            std::byte* shared = shared_memory<std::byte>();
            auto* full = reinterpret_cast<std::uint64_t*>(shared);
            auto* empty = reinterpret_cast<std::uint64_t*>(shared + 8);
            auto* done = reinterpret_cast<std::uint64_t*>(shared + 16);
            if (threadIdx.x == 0) {
                std::memset(shared + a_at, 0, 2048);
                mbarrier_init(full, 1);
                mbarrier_init(empty, 128);
                mbarrier_init(done, 128);
                fence_mbarrier_init();
            }
            sync_threads();
            for (unsigned round = 0; round < 2; ++round) {
                if (threadIdx.x == 128) {
                    if (round > 0) mbarrier_wait_parity(empty, 0);
                    if (round > 0 && release == Release::early_then_ordered) mbarrier_wait_parity(done, 0);
                    mbarrier_arrive(full, 256);
                    tma_load(&map, shared + b_at, 0, 0, full);
                } else if (threadIdx.x < 128) {
                    mbarrier_wait_parity(full, round);
                    float acc[4];
                    wgmma_fence();
                    wgmma_bf16_ss<8>(acc, descriptor(a_at), descriptor(b_at), false);
                    wgmma_commit_group();
                    if (early) mbarrier_arrive(empty);
                    wgmma_wait_group<0>();
                    if (!early) mbarrier_arrive(empty);
                    if (release == Release::early_then_ordered) mbarrier_arrive(done);
                }
            }
        });
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("wgmma misuse fails the simulated block: fence, commit and wait", "[gpu-host][wgmma][misuse]") {
    CHECK(run_two_rounds(Misuse::none).empty());
    CHECK_THAT(run_two_rounds(Misuse::no_fence), Contains("without a wgmma.fence"));
    CHECK_THAT(run_two_rounds(Misuse::no_fence_after_wait),
               Contains("without a wgmma.fence since its last wait_group"));
    CHECK_THAT(run_two_rounds(Misuse::no_commit), Contains("not committed"));
    CHECK_THAT(run_two_rounds(Misuse::no_wait), Contains("ended with 1 wgmma(s) in flight (0 not committed)"));
}

TEST_CASE("wgmma misuse fails the simulated block: what a wgmma in flight reads and writes",
          "[gpu-host][wgmma][misuse]") {
    CHECK_THAT(run_two_rounds(Misuse::write_accumulator),
               Contains("wrote its accumulator element 1 while its wgmma was in flight"));
    CHECK_THAT(run_two_rounds(Misuse::write_operand), Contains("changed between its issue and its wait_group"));
}

TEST_CASE("a buffer released before wgmma.wait_group and reloaded by TMA fails, whatever the timing",
          "[gpu-host][wgmma][misuse][sanitized]") {
    CHECK(run_ring(Release::after_wait).empty());
    // released early, but reloaded only after a barrier whose arrivals follow the wait_group
    CHECK(run_ring(Release::early_then_ordered).empty());
    for (int attempt = 0; attempt < 3; ++attempt) {
        const std::string why = run_ring(Release::early);
        INFO(why);
        CHECK_THAT(why, Contains("a TMA load into shared +3072..+3328 by thread 128"));
        CHECK_THAT(why, Contains("mbarrier at shared +8 was released at tests/gpu_host/test_wgmma_misuse_host.cpp"));
        CHECK_THAT(why, Contains("while its wgmma still read +3"));
    }
}
