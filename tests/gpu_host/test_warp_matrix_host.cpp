// Property: gpu/primitives/warp_matrix.hpp's ldmatrix and stmatrix on the simulated warp move the elements
// the PTX ISA says: for x1, x2 and x4, with and without .trans, lane t's register i holds row
// t / 4 and columns 2 (t % 4), 2 (t % 4) + 1 of matrix i (transposed: column t / 4 of rows
// 2 (t % 4), 2 (t % 4) + 1), each matrix's rows at the addresses of lanes 8i to 8i + 7, here
// scattered over shared memory; stmatrix is ldmatrix's inverse. A row address that is not
// 16-byte aligned ends the launch with one error.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/host/simt_host.hpp"
#include "gpu/primitives/warp_matrix.hpp"
#include "lib/error.hpp"

using namespace roundscope;
using namespace roundscope::gpu;

namespace {

// The code of element (r, c) of matrix i: never 0.
std::uint16_t code(int i, int r, int c) { return static_cast<std::uint16_t>(0x1000 * (i + 1) + 16 * r + c); }

// Lane l's row: matrix l / 8, row l % 8, at a scattered 16-byte-aligned offset.
std::uint32_t row_offset(int lane) { return static_cast<std::uint32_t>(16 * ((lane * 7 + 3) % 32) + 64); }

template <int X>
void check_ldmatrix(bool trans) {
    std::vector<std::uint32_t> got(32 * X);
    simt::run_grid(dim3(1), dim3(32), 1024, [&] {
        std::byte* shared = shared_memory<std::byte>();
        const int lane = static_cast<int>(threadIdx.x);
        if (lane < 8 * X)
            for (int c = 0; c < 8; ++c) {
                const std::uint16_t v = code(lane / 8, lane % 8, c);
                std::memcpy(shared + row_offset(lane) + 2 * c, &v, 2);
            }
        std::uint32_t reg[X];
        ldmatrix<X>(reg, shared + row_offset(lane % (8 * X)), trans);
        for (int i = 0; i < X; ++i) got[static_cast<std::size_t>(lane * X + i)] = reg[i];
    });
    for (int lane = 0; lane < 32; ++lane) {
        for (int i = 0; i < X; ++i) {
            const int r = lane / 4, c = 2 * (lane % 4);
            const std::uint32_t want = trans ? code(i, c, r) | std::uint32_t{code(i, c + 1, r)} << 16
                                             : code(i, r, c) | std::uint32_t{code(i, r, c + 1)} << 16;
            INFO("x" << X << (trans ? ".trans" : "") << " lane " << lane << " register " << i);
            CHECK(got[static_cast<std::size_t>(lane * X + i)] == want);
        }
    }
}

template <int X>
void check_stmatrix_inverts_ldmatrix(bool trans) {
    std::vector<std::uint32_t> back(32 * X);
    std::vector<std::uint16_t> stored(32 * 8);
    simt::run_grid(dim3(1), dim3(32), 1024, [&] {
        std::byte* shared = shared_memory<std::byte>();
        const int lane = static_cast<int>(threadIdx.x);
        std::uint32_t reg[X];
        for (int i = 0; i < X; ++i) reg[i] = 0x00010001u * static_cast<std::uint32_t>(lane) + 0x01000100u * (i + 1);
        stmatrix<X>(reg, shared + row_offset(lane % (8 * X)), trans);
        for (int c = 0; c < 8; ++c)
            std::memcpy(&stored[static_cast<std::size_t>(lane * 8 + c)], shared + row_offset(lane) + 2 * c, 2);
        std::uint32_t again[X];
        ldmatrix<X>(again, shared + row_offset(lane % (8 * X)), trans);
        for (int i = 0; i < X; ++i) back[static_cast<std::size_t>(lane * X + i)] = again[i];
    });
    for (int lane = 0; lane < 32; ++lane) {
        for (int i = 0; i < X; ++i) {
            const std::uint32_t mine = 0x00010001u * static_cast<std::uint32_t>(lane) + 0x01000100u * (i + 1);
            INFO("x" << X << (trans ? ".trans" : "") << " lane " << lane << " register " << i);
            CHECK(back[static_cast<std::size_t>(lane * X + i)] == mine);
            // where the low half went: row t / 4, column 2 (t % 4) of matrix i (transposed: swapped)
            const int r = lane / 4, c = 2 * (lane % 4);
            const int row_lane = 8 * i + (trans ? c : r), column = trans ? r : c;
            CHECK(stored[static_cast<std::size_t>(row_lane * 8 + column)] == static_cast<std::uint16_t>(mine));
        }
    }
}

}  // namespace

TEST_CASE("ldmatrix gives each lane the fragment the PTX ISA names", "[gpu-host][ldmatrix][sanitized]") {
    for (const bool trans : {false, true}) {
        check_ldmatrix<1>(trans);
        check_ldmatrix<2>(trans);
        check_ldmatrix<4>(trans);
    }
}

TEST_CASE("stmatrix puts the fragments back where ldmatrix takes them", "[gpu-host][ldmatrix][sanitized]") {
    for (const bool trans : {false, true}) {
        check_stmatrix_inverts_ldmatrix<1>(trans);
        check_stmatrix_inverts_ldmatrix<2>(trans);
        check_stmatrix_inverts_ldmatrix<4>(trans);
    }
}

TEST_CASE("ldmatrix refuses a row address that is not 16-byte aligned", "[gpu-host][ldmatrix]") {
    std::string m;
    try {
        simt::run_grid(dim3(1), dim3(32), 1024, [] {
            std::uint32_t reg[1];
            ldmatrix<1>(reg, shared_memory<std::byte>() + 16 * threadIdx.x + (threadIdx.x == 3 ? 8 : 0));
        });
    } catch (const Error& e) {
        m = e.what();
    }
    CHECK_THAT(m, Catch::Contains("ldmatrix: lane 3") && Catch::Contains("not 16-byte aligned"));
}
