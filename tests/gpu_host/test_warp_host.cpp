// Property: gpu/primitives/warp.hpp's shuffles, votes and sync_warp on the simulated GPU do what CUDA's
// full-warp intrinsics do: each lane gets the value of the lane its mask or index names, a
// butterfly of xor shuffles leaves every lane the warp's total, a ballot sets exactly the bits
// of the lanes whose predicate holds, and a lane reads after sync_warp what its neighbour wrote
// before it; elect_one is true in one lane of each warp, the same one each time, and not lane 0
// (the negative control: work done by "the elected lane 0" is not done). Several warps and blocks at once, and
// collective steps interleaved, so that a buffer shared between warps or steps would give wrong values (and, under
// ThreadSanitizer, a reported race).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "gpu/host/simt_host.hpp"
#include "gpu/primitives/warp.hpp"

using namespace roundscope;
using namespace roundscope::gpu;

namespace {

constexpr unsigned warps_per_block = 3, blocks = 4, threads = 32 * warps_per_block;

// What each simulated thread computed, one row per thread.
struct Row {
    std::uint32_t xor_partner[5], indexed, total, ballot, all, any, neighbour;
};

std::vector<Row> run_warp_kernel() {
    std::vector<Row> rows(blocks * threads);
    simt::run_grid(dim3(blocks), dim3(threads), threads * sizeof(std::uint32_t), [&] {
        const unsigned t = threadIdx.x, lane = t % 32, warp = t / 32;
        const std::uint32_t mine = 1000 * blockIdx.x + 100 * warp + lane;  // every thread its own
        Row& row = rows[blockIdx.x * threads + t];
        for (int m = 0; m < 5; ++m) row.xor_partner[m] = shfl_xor(mine, 1 << m);
        row.indexed = shfl(mine, static_cast<int>((lane * 7 + 3) % 32));
        std::uint32_t total = lane;
        for (int m = 16; m >= 1; m /= 2) total += shfl_xor(total, m);
        row.total = total;
        row.ballot = ballot(lane % 3 == 0 || warp == lane);
        row.all = all_lanes(lane < 32) && !all_lanes(lane != 5);
        row.any = any_lane(lane == 17) && !any_lane(lane > 40);
        std::uint32_t* shared = shared_memory<std::uint32_t>();
        shared[t] = mine;
        sync_warp();
        row.neighbour = shared[warp * 32 + (lane + 1) % 32];
    });
    return rows;
}

void check(const std::vector<Row>& rows) {
    for (unsigned b = 0; b < blocks; ++b) {
        for (unsigned t = 0; t < threads; ++t) {
            const unsigned lane = t % 32, warp = t / 32;
            const Row& r = rows[b * threads + t];
            auto value = [&](unsigned l) { return 1000 * b + 100 * warp + l; };
            INFO("block " << b << " thread " << t);
            for (int m = 0; m < 5; ++m) CHECK(r.xor_partner[m] == value(lane ^ (1u << m)));
            CHECK(r.indexed == value((lane * 7 + 3) % 32));
            CHECK(r.total == 31 * 32 / 2);
            std::uint32_t want = 0;
            for (unsigned l = 0; l < 32; ++l) want |= (l % 3 == 0 || warp == l ? 1u : 0u) << l;
            CHECK(r.ballot == want);
            CHECK(r.all == 1);
            CHECK(r.any == 1);
            CHECK(r.neighbour == value((lane + 1) % 32));
        }
    }
}

}  // namespace

TEST_CASE("simulated GPU warp shuffles, votes and sync_warp do what CUDA's full-warp intrinsics do",
          "[gpu-host][warp][sanitized]") {
    check(run_warp_kernel());
}

TEST_CASE("float shuffles move the bits unchanged", "[gpu-host][warp]") {
    const float odd[] = {-0.0f, 0x1p-149f, 3.5f, -0x1.fffffep127f};
    std::vector<std::uint32_t> got(32);
    simt::run_grid(dim3(1), dim3(32), 0, [&] {
        const unsigned lane = threadIdx.x;
        got[lane] = bits_of(shfl_xor(odd[lane % 4], 1));
    });
    for (unsigned lane = 0; lane < 32; ++lane) CHECK(got[lane] == bits_of(odd[(lane ^ 1) % 4]));
}

// The negative control, run only by ctest's gpu_host_warp_race_control under ThreadSanitizer,
// which must report a data race: a lane reads its neighbour's shared-memory write with no
// sync_warp between them (the kernel above, without the sync).
TEST_CASE("a neighbour's shared-memory write read without sync_warp", "[.warp-race-control]") {
    std::vector<std::uint32_t> got(32);
    simt::run_grid(dim3(1), dim3(32), 32 * sizeof(std::uint32_t), [&] {
        const unsigned lane = threadIdx.x;
        (void)ballot(true);  // a collective step before, as in the kernel above
        std::uint32_t* shared = shared_memory<std::uint32_t>();
        shared[lane] = lane;
        got[lane] = shared[(lane + 1) % 32];
    });
    SUCCEED();
}

TEST_CASE("elect_one elects one lane of each warp, the same each time, and not lane 0", "[gpu-host][warp][sanitized]") {
    std::vector<std::uint32_t> first(blocks * threads), second(blocks * threads), lane0_work(blocks * warps_per_block);
    simt::run_grid(dim3(blocks), dim3(threads), 0, [&] {
        const unsigned t = threadIdx.x, i = blockIdx.x * threads + t;
        first[i] = elect_one() ? 1 : 0;
        second[i] = elect_one() ? 1 : 0;
        if (elect_one() && t % 32 == 0) lane0_work[blockIdx.x * warps_per_block + t / 32] = 1;  // unportable
    });
    for (unsigned w = 0; w < blocks * warps_per_block; ++w) {
        unsigned elected = 0, same = 0;
        for (unsigned l = 0; l < 32; ++l) elected += first[32 * w + l], same += first[32 * w + l] == second[32 * w + l];
        CHECK(elected == 1);
        CHECK(same == 32);
        CHECK(lane0_work[w] == 0);
    }
}
