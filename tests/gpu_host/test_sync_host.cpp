// Property: gpu/primitives/sync.hpp's named barriers and mbarriers on the simulated GPU order what they
// order: a producer warp fills a double buffer that two consumer warps read, signalled by
// bar.arrive / bar.sync (full and empty barriers, as a warp-specialized kernel pairs them) and
// by mbarriers whose phases wait for announced bytes (expect_tx) as a TMA copy completes them,
// over rounds that use both parities. Negative controls: a barrier's count changed within a
// phase, a count that is not whole warps, an mbarrier used before its init, and two deadlocks
// (a warp that never arrives; bytes announced and never completed) each end the kernel with
// one error naming where every thread waits; a read without its wait is a race that
// ThreadSanitizer reports (ctest's gpu_host_sync_race_control).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "gpu/host/simt_host.hpp"
#include "gpu/primitives/register_budget.hpp"
#include "gpu/primitives/sync.hpp"
#include "lib/error.hpp"

using namespace roundscope;
using namespace roundscope::gpu;

namespace {

constexpr int rounds = 8;

std::uint32_t value(int round, unsigned i) { return 1000u * static_cast<unsigned>(round) + i; }

// A short watchdog for the deadlock cases, the default restored after.
struct ShortWatchdog {
    std::chrono::milliseconds before = simt::watchdog();
    ShortWatchdog() { simt::set_watchdog(std::chrono::milliseconds(300)); }
    ~ShortWatchdog() { simt::set_watchdog(before); }
};

}  // namespace

TEST_CASE("named barriers: a producer warp and two consumer warps through a double buffer",
          "[gpu-host][sync][sanitized]") {
    const unsigned blocks = 2, threads = 96;
    std::vector<std::uint32_t> wrong(blocks * threads, 0);
    simt::run_grid(dim3(blocks), dim3(threads), 2 * 64 * sizeof(std::uint32_t), [&] {
        std::uint32_t* buffer = shared_memory<std::uint32_t>();
        const unsigned t = threadIdx.x;
        for (int r = 0; r < rounds; ++r) {
            const unsigned b = static_cast<unsigned>(r % 2), full = 1 + b, empty = 3 + b;
            if (t < 32) {  // the producer: wait until the buffer is empty, fill it, signal it full
                if (r >= 2) named_barrier_sync(empty, threads);
                for (unsigned i = t; i < 64; i += 32) buffer[b * 64 + i] = value(r, i) + blockIdx.x;
                named_barrier_arrive(full, threads);
            } else {  // the consumers: wait until full, read, signal empty
                named_barrier_sync(full, threads);
                const unsigned i = t - 32;
                wrong[blockIdx.x * threads + t] += buffer[b * 64 + i] != value(r, i) + blockIdx.x;
                if (r + 2 < rounds) named_barrier_arrive(empty, threads);
            }
        }
    });
    for (const std::uint32_t w : wrong) CHECK(w == 0);
}

TEST_CASE("mbarriers: bytes announced by expect_tx and completed by a copy, both parities",
          "[gpu-host][sync][sanitized]") {
    const unsigned threads = 64;
    std::vector<std::uint32_t> wrong(threads, 0);
    // shared: full[2], empty[2] (uint64), then data[2][64]
    simt::run_grid(dim3(1), dim3(threads), 4 * sizeof(std::uint64_t) + 2 * 64 * sizeof(std::uint32_t), [&] {
        std::uint64_t* full = shared_memory<std::uint64_t>();
        std::uint64_t* empty = full + 2;
        std::uint32_t* data = reinterpret_cast<std::uint32_t*>(full + 4);
        const unsigned t = threadIdx.x;
        if (t == 0)
            for (int b = 0; b < 2; ++b) mbarrier_init(&full[b], 1), mbarrier_init(&empty[b], 32);
        sync_threads();
        for (int r = 0; r < rounds; ++r) {
            const int b = r % 2;
            const auto parity = static_cast<unsigned>(r / 2) & 1u;
            if (t == 0) {  // the producer thread: as a TMA load, announce the bytes, then land them
                if (r >= 2) mbarrier_wait_parity(&empty[b], parity ^ 1u);
                mbarrier_arrive(&full[b], 64 * sizeof(std::uint32_t));
                for (unsigned i = 0; i < 64; ++i) data[b * 64 + i] = value(r, i);
                mbarrier_complete_tx(&full[b], 64 * sizeof(std::uint32_t));
            } else if (t >= 32) {  // the consumer warp
                mbarrier_wait_parity(&full[b], parity);
                const unsigned i = t - 32;
                wrong[t] += data[b * 64 + i] != value(r, i);
                wrong[t] += data[b * 64 + i + 32] != value(r, i + 32);
                mbarrier_arrive(&empty[b]);
            }
        }
    });
    for (const std::uint32_t w : wrong) CHECK(w == 0);
}

TEST_CASE("a misused barrier ends the kernel with one error", "[gpu-host][sync]") {
    auto error_of = [](unsigned threads, const std::function<void()>& body) {
        try {
            simt::run_grid(dim3(1), dim3(threads), 64, body);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    // a count changed within a phase
    std::string m = error_of(96, [] { named_barrier_sync(1, threadIdx.x < 32 ? 64u : 96u); });
    CHECK_THAT(m, Catch::Contains("named barrier 1") && Catch::Contains("the phase began with"));
    // a count that is not whole warps
    m = error_of(64, [] { named_barrier_sync(2, 48); });
    CHECK_THAT(m, Catch::Contains("not whole warps"));
    // an mbarrier used before its init
    m = error_of(32, [] { mbarrier_arrive(shared_memory<std::uint64_t>()); });
    CHECK_THAT(m, Catch::Contains("before its init"));
}

TEST_CASE("a deadlock ends the kernel with where every thread waits", "[gpu-host][sync]") {
    const ShortWatchdog watchdog;
    // warp 1 never arrives at the barrier warp 0 waits on
    std::string m;
    try {
        simt::run_grid(dim3(1), dim3(64), 0, [] {
            if (threadIdx.x < 32) named_barrier_sync(5, 64);
        });
    } catch (const Error& e) {
        m = e.what();
    }
    CHECK_THAT(m, Catch::Contains("deadlock") && Catch::Contains("threads 0-31: bar.sync 5 for 64 threads") &&
                      Catch::Contains("test_sync_host.cpp:") && Catch::Contains("threads 32-63: finished"));
    // bytes announced that no copy completes
    m.clear();
    try {
        simt::run_grid(dim3(1), dim3(64), sizeof(std::uint64_t), [] {
            std::uint64_t* bar = shared_memory<std::uint64_t>();
            if (threadIdx.x == 0) mbarrier_init(bar, 1);
            sync_threads();
            if (threadIdx.x == 0) mbarrier_arrive(bar, 128);
            mbarrier_wait_parity(bar, 0);
        });
    } catch (const Error& e) {
        m = e.what();
    }
    CHECK_THAT(m, Catch::Contains("deadlock") && Catch::Contains("threads 0-63: mbarrier") &&
                      Catch::Contains("wait for parity 0"));
}

// A block of 384 threads starts with 168 registers a thread (64 K / 384, in units of 8). Two
// warpgroups take 240 from a third that gives back to 24: 2 x 128 x 240 + 128 x 24 = 384 x 168.
// Each run: the consumers' increase (`take`), and whether they ask before the producer gives.
std::string run_register_split(unsigned take, bool ask_first) {
    std::string m;
    try {
        simt::run_grid(dim3(1), dim3(384), 0, [&] {
            if (threadIdx.x < 256) {
                if (!ask_first) sync_threads();
                if (take == 240) warpgroup_registers_increase<240>();
                if (take == 248) warpgroup_registers_increase<248>();
                if (take == 160) warpgroup_registers_increase<160>();
                if (ask_first) sync_threads();
            } else {
                warpgroup_registers_decrease<24>();
                sync_threads();
            }
        });
    } catch (const Error& e) {
        m = e.what();
    }
    return m;
}

TEST_CASE("setmaxnreg is accounted: a split that does not balance deadlocks, a wrong direction fails",
          "[gpu-host][sync][registers]") {
    const ShortWatchdog watchdog;
    CHECK(run_register_split(240, false).empty());
    CHECK(run_register_split(240, true).empty());  // the increase waits for the producer's decrease
    const std::string over = run_register_split(248, true);
    CHECK_THAT(over, Catch::Contains("deadlock") && Catch::Contains(": setmaxnreg.inc to 248 registers, ") &&
                         Catch::Contains("free in the block (tests/gpu_host/test_sync_host.cpp:"));
    CHECK_THAT(run_register_split(160, false),
               Catch::Contains("setmaxnreg.inc 160") && Catch::Contains("holds 168 registers"));
}

// The negative control, run only by ctest's gpu_host_sync_race_control under ThreadSanitizer,
// which must report a data race: the consumer reads what the copy lands without waiting on
// the mbarrier (the kernel above, without mbarrier_wait_parity). A relaxed flag, which orders
// nothing for ThreadSanitizer, makes the copy land after the read on every run, so that no
// lock taken by chance between the two accesses can order them.
TEST_CASE("data read without waiting on its mbarrier", "[.sync-race-control]") {
    std::uint32_t got = 0;
    std::atomic<bool> read{false};
    simt::run_grid(dim3(1), dim3(64), sizeof(std::uint64_t) + 32 * sizeof(std::uint32_t), [&] {
        std::uint64_t* bar = shared_memory<std::uint64_t>();
        std::uint32_t* data = reinterpret_cast<std::uint32_t*>(bar + 1);
        if (threadIdx.x == 0) mbarrier_init(bar, 1);
        sync_threads();
        if (threadIdx.x == 0) {  // no lock between the flag and the write
            while (!read.load(std::memory_order_relaxed)) std::this_thread::yield();
            for (unsigned i = 0; i < 32; ++i) data[i] = i;
            mbarrier_arrive(bar, 32 * sizeof(std::uint32_t));
            mbarrier_complete_tx(bar, 32 * sizeof(std::uint32_t));
        } else if (threadIdx.x == 32) {
            got = data[0];
            read.store(true, std::memory_order_relaxed);
            std::this_thread::sleep_for(std::chrono::milliseconds(200));  // no lock taken until the write
        }
    });
    SUCCEED();
}
