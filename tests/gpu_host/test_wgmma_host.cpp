// Property: gpu/primitives/wgmma.hpp's wgmma on the simulated warpgroup computes D = A B + C element for
// element as the emulator's sm_90 wgmma model does over the 16 products, with every element where
// the PTX ISA's accumulator fragment puts it: for N = 8, 64 and 256; A and B read through
// descriptors in each layout (no swizzle, 32-, 64-, 128-byte swizzles) or A from registers in
// mma.sync's fragment; with scale-d 0 and 1; and over K = 64 as four chained wgmmas whose
// descriptors step along K. It is asynchronous as on the GPU: the accumulators read as NaN from
// the issue until their group is waited for, and wait_group 1 completes only the older group.
// The reference here builds each element from the matrices with the fragment rules written
// out in this file, apart from gpu/host/simt_wgmma.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu/host/simt_host.hpp"
#include "gpu/primitives/sync.hpp"
#include "gpu/primitives/wgmma.hpp"
#include "gpu/probes/wgmma_layout_probe.hpp"
#include "lib/bits.hpp"
#include "tests/gpu_host/wgmma_reference.hpp"

using namespace roundscope;
using namespace roundscope::gpu;

namespace {

using Problem = test::WgmmaProblem;

Problem random_problem(int n, int k, unsigned seed) { return test::random_wgmma_problem(n, k, seed); }

// The operands' layouts: the layout probe's (gpu/probes/wgmma_layout_probe.hpp), K-major unless named.
WgmmaOperand layout(std::uint32_t start, int k, Swizzle s, int step) {
    return probe_layout(Major::k, start, k, s, step);
}
WgmmaOperand layout(Major major, std::uint32_t start, int k, Swizzle s, int step) {
    return probe_layout(major, start, k, s, step);
}

// Thread t's accumulator element i (of N / 2): its row and column in D.
void fragment(int t, int i, int& row, int& col) {
    const int warp = t / 32, lane = t % 32, j = i / 4, e = i % 4;
    row = 16 * warp + lane / 4 + (e >= 2 ? 8 : 0);
    col = 8 * j + 2 * (lane % 4) + (e & 1);
}

// Lane's mma.sync m16n8k16 A register r (two BF16: a_{2r}, a_{2r+1}) of the warp's rows.
std::uint32_t a_register(const Problem& p, int warp, int lane, int r, int k0) {
    std::uint32_t reg = 0;
    for (int h = 0; h < 2; ++h) {
        const int i = 2 * r + h, group = lane / 4, thread = lane % 4;
        const int row = 16 * warp + group + ((i >= 2 && i < 4) || i >= 6 ? 8 : 0);
        const int col = thread * 2 + (i & 1) + (i >= 4 ? 8 : 0);
        reg |= p.a[static_cast<std::size_t>(row * p.k + k0 + col)] << (16 * h);
    }
    return reg;
}

std::vector<float> reference(const Problem& p, bool scale_d) { return test::wgmma_reference(p, scale_d); }

// Runs the problem on one warpgroup: A and B stored in layout `s` (A from registers if
// a_in_registers), one wgmma per k16 step, one group; D gathered back by the fragment rule.
// B is read as BRead says (BMajor unless a negative control reads it otherwise).
template <int N, Major AMajor = Major::k, Major BMajor = Major::k, Major BRead = BMajor>
std::vector<float> run(const Problem& p, Swizzle s, bool a_in_registers, bool scale_d) {
    const std::uint32_t a_at = 1024, b_at = 1024 + 8192;
    std::vector<float> d(p.c.size());
    simt::run_grid(dim3(1), dim3(128), b_at + 32768, [&] {
        std::byte* shared = shared_memory<std::byte>();
        const int t = static_cast<int>(threadIdx.x);
        if (t == 0) {
            for (int step = 0; step < p.k / 16; ++step)
                for (int kk = 0; kk < 16; ++kk) {
                    const auto k = static_cast<std::size_t>(16 * step + kk);
                    for (int r = 0; r < 64; ++r)
                        std::memcpy(shared + operand_address(layout(AMajor, a_at, p.k, s, step), AMajor, r, kk, 2),
                                    &p.a[static_cast<std::size_t>(r * p.k) + k], 2);
                    for (int c = 0; c < N; ++c)
                        std::memcpy(shared + operand_address(layout(BMajor, b_at, p.k, s, step), BMajor, c, kk, 2),
                                    &p.b[static_cast<std::size_t>(c * p.k) + k], 2);
                }
        }
        sync_threads();
        float acc[N / 2];
        for (int i = 0; i < N / 2; ++i) {
            int row = 0, col = 0;
            fragment(t, i, row, col);
            acc[i] = p.c[static_cast<std::size_t>(row * N + col)];
        }
        wgmma_fence();
        for (int step = 0; step < p.k / 16; ++step) {
            const bool add = scale_d || step > 0;
            const std::uint64_t db = encode_descriptor(layout(BMajor, b_at, p.k, s, step));
            if (a_in_registers) {
                std::uint32_t a[4];
                for (int r = 0; r < 4; ++r) a[r] = a_register(p, t / 32, t % 32, r, 16 * step);
                wgmma_bf16_rs<N, BRead>(acc, a, db, add);
            } else {
                wgmma_bf16_ss<N, AMajor, BRead>(acc, encode_descriptor(layout(AMajor, a_at, p.k, s, step)), db, add);
            }
        }
        wgmma_commit_group();
        wgmma_wait_group<0>();
        for (int i = 0; i < N / 2; ++i) {
            int row = 0, col = 0;
            fragment(t, i, row, col);
            d[static_cast<std::size_t>(row * N + col)] = acc[i];
        }
    });
    return d;
}

std::size_t differing(const std::vector<float>& x, const std::vector<float>& y) { return test::differing_floats(x, y); }

}  // namespace

TEST_CASE("wgmma on the simulated warpgroup: every element as the model gives it, where the fragment puts it",
          "[gpu-host][wgmma][sanitized]") {
    for (const Swizzle s : {Swizzle::none, Swizzle::b32, Swizzle::b64, Swizzle::b128}) {
        for (const bool registers : {false, true}) {
            for (const bool scale_d : {false, true}) {
                INFO("swizzle " << swizzle_span(s) << (registers ? " A from registers" : " A from shared memory")
                                << " scale-d " << scale_d);
                const Problem p8 = random_problem(8, 16, 1), p64 = random_problem(64, 16, 2);
                CHECK(differing(run<8>(p8, s, registers, scale_d), reference(p8, scale_d)) == 0);
                CHECK(differing(run<64>(p64, s, registers, scale_d), reference(p64, scale_d)) == 0);
            }
        }
        const Problem wide = random_problem(256, 16, 3);
        CHECK(differing(run<256>(wide, s, false, true), reference(wide, true)) == 0);
    }
}

TEST_CASE("MN-major (transposed) operands: every element as the model gives it", "[gpu-host][wgmma][sanitized]") {
    constexpr Major k = Major::k, mn = Major::mn;
    for (const Swizzle s : {Swizzle::none, Swizzle::b32, Swizzle::b64, Swizzle::b128}) {
        INFO("swizzle " << swizzle_span(s));
        // K = 16 where a K-major operand takes part (this file's K-major layouts keep K within
        // a span); MN-major operands over K = 64, four chained k16 steps
        const Problem p16 = random_problem(64, 16, 6), p64 = random_problem(64, 64, 8);
        const Problem p128 = random_problem(128, 32, 7);
        CHECK(differing(run<64, k, mn>(p16, s, false, true), reference(p16, true)) == 0);
        CHECK(differing(run<64, mn, k>(p16, s, false, false), reference(p16, false)) == 0);
        CHECK(differing(run<64, mn, mn>(p64, s, false, true), reference(p64, true)) == 0);
        CHECK(differing(run<128, k, mn>(p128, s, true, true), reference(p128, true)) == 0);  // P V's form
        // the negative control: B written MN-major but read K-major (imm-trans-b 0) differs
        CHECK(differing(run<64, k, mn, k>(p16, s, false, true), reference(p16, true)) > 1000);
    }
}

TEST_CASE("chained wgmmas over K = 64 add to their pending accumulators", "[gpu-host][wgmma]") {
    for (const Swizzle s : {Swizzle::none, Swizzle::b128}) {
        const Problem p = random_problem(64, 64, 4);
        INFO("swizzle " << swizzle_span(s));
        CHECK(differing(run<64>(p, s, false, true), reference(p, true)) == 0);
        CHECK(differing(run<64>(p, s, true, false), reference(p, false)) == 0);
        // the negative control: a reference that drops the middle steps differs
        Problem short_k = p;
        short_k.k = 16;
        std::vector<std::uint32_t> a16(64 * 16), b16(64 * 16);
        for (int r = 0; r < 64; ++r)
            for (int k = 0; k < 16; ++k) a16[r * 16 + k] = p.a[r * 64 + k], b16[r * 16 + k] = p.b[r * 64 + k];
        short_k.a = a16, short_k.b = b16;
        CHECK(differing(run<64>(p, s, false, true), reference(short_k, true)) > 1000);
    }
}

TEST_CASE("wgmma accumulators are unreadable until their group is waited for", "[gpu-host][wgmma]") {
    const Problem p = random_problem(8, 16, 5);
    std::vector<float> before(128 * 4), after_first(128 * 8), after_all(128 * 8);
    simt::run_grid(dim3(1), dim3(128), 4096, [&] {
        std::byte* shared = shared_memory<std::byte>();
        const int t = static_cast<int>(threadIdx.x);
        if (t == 0)
            for (int r = 0; r < 64; ++r)
                for (int k = 0; k < 16; ++k) {
                    std::memcpy(shared + k_major_address(layout(1024, 16, Swizzle::none, 0), r, k, 2), &p.a[r * 16 + k],
                                2);
                    if (r < 8)
                        std::memcpy(shared + k_major_address(layout(3072, 16, Swizzle::none, 0), r, k, 2),
                                    &p.b[r * 16 + k], 2);
                }
        sync_threads();
        float first[4] = {0, 0, 0, 0}, second[4] = {0, 0, 0, 0};
        const std::uint64_t da = encode_descriptor(layout(1024, 16, Swizzle::none, 0));
        const std::uint64_t db = encode_descriptor(layout(3072, 16, Swizzle::none, 0));
        wgmma_fence();
        wgmma_bf16_ss<8>(first, da, db, false);
        wgmma_commit_group();
        for (int i = 0; i < 4; ++i) before[static_cast<std::size_t>(t * 4 + i)] = first[i];
        wgmma_bf16_ss<8>(second, da, db, false);
        wgmma_commit_group();
        wgmma_wait_group<1>();  // the first group only
        for (int i = 0; i < 4; ++i)
            after_first[static_cast<std::size_t>(t * 8 + i)] = first[i],
                                                         after_first[static_cast<std::size_t>(t * 8 + 4 + i)] =
                                                             second[i];
        wgmma_wait_group<0>();
        for (int i = 0; i < 4; ++i)
            after_all[static_cast<std::size_t>(t * 8 + i)] = first[i],
                                                       after_all[static_cast<std::size_t>(t * 8 + 4 + i)] = second[i];
    });
    const std::vector<float> want = reference(p, false);
    for (int t = 0; t < 128; ++t) {
        for (int i = 0; i < 4; ++i) {
            int row = 0, col = 0;
            fragment(t, i, row, col);
            const float w = want[static_cast<std::size_t>(row * 8 + col)];
            INFO("thread " << t << " element " << i);
            CHECK(std::isnan(before[static_cast<std::size_t>(t * 4 + i)]));
            CHECK(bits_of(after_first[static_cast<std::size_t>(t * 8 + i)]) == bits_of(w));
            CHECK(std::isnan(after_first[static_cast<std::size_t>(t * 8 + 4 + i)]));
            CHECK(bits_of(after_all[static_cast<std::size_t>(t * 8 + 4 + i)]) == bits_of(w));
        }
    }
}
