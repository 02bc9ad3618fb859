// Property: gpu/primitives/wgmma_descriptor.hpp's descriptor encodes and decodes every field; its K-major
// address without swizzling is the core-matrix layout the H100 probes confirmed (8 rows x 16
// bytes, consecutive along K, then along the rows) for 16-, 8- and 32-bit elements; and with a
// 32-, 64- or 128-byte swizzle it reads a tile exactly as the simulated TMA lands it (a box of
// one span per row, 64 rows), from the tile's start and from starts advanced by a k16 step, as
// a kernel walks K within the span. A descriptor that mixes up the swizzle reads other values.
// MN-major: core matrices of 8 k x 16 bytes without swizzling (the PTX ISA's canonical layout),
// and a row-major [K][MN] tile landed by swizzled TMA boxes reads back as the operand (V in P V).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/host/simt_host.hpp"
#include "gpu/primitives/tma.hpp"
#include "gpu/primitives/wgmma_descriptor.hpp"

using namespace roundscope;
using namespace roundscope::gpu;

TEST_CASE("wgmma descriptors encode and decode every field", "[gpu-host][wgmma]") {
    std::mt19937 rng(7);
    for (int i = 0; i < 1000; ++i) {
        WgmmaOperand d;
        d.start = (rng() & 0x3FFF) << 4, d.lbo = (rng() & 0x3FFF) << 4, d.sbo = (rng() & 0x3FFF) << 4;
        d.base_offset = rng() & 7;
        d.swizzle = static_cast<Swizzle>(rng() & 3);
        const WgmmaOperand back = decode_descriptor(encode_descriptor(d));
        REQUIRE((back.start == d.start && back.lbo == d.lbo && back.sbo == d.sbo && back.base_offset == d.base_offset &&
                 back.swizzle == d.swizzle));
    }
    // the swizzle field's values (PTX: 1 is 128 bytes, 3 is 32)
    CHECK(encode_descriptor(WgmmaOperand{0, 0, 0, 0, Swizzle::b128}) >> 62 == 1);
    CHECK(encode_descriptor(WgmmaOperand{0, 0, 0, 0, Swizzle::b32}) >> 62 == 3);
}

TEST_CASE("without swizzling, K-major addresses are the core matrices the H100 probes used", "[gpu-host][wgmma]") {
    for (const std::uint32_t bytes : {1u, 2u, 4u}) {
        const std::uint32_t k = 32 / bytes, per_row = 16 / bytes, along_k = k / per_row;  // one wgmma's K
        const WgmmaOperand d{2048, 128, 128 * along_k, 0, Swizzle::none};
        for (std::uint32_t r = 0; r < 64; ++r)
            for (std::uint32_t c = 0; c < k; ++c) {
                const std::uint32_t probe =
                    ((r / 8) * along_k + c / per_row) * 128 + (r % 8) * 16 + (c % per_row) * bytes;
                REQUIRE(k_major_address(d, r, c, bytes) == 2048 + probe);
            }
    }
}

TEST_CASE("a swizzled K-major operand is read as a TMA load with the same swizzle lands it", "[gpu-host][wgmma][tma]") {
    for (const Swizzle s : {Swizzle::b32, Swizzle::b64, Swizzle::b128}) {
        const std::uint32_t span = swizzle_span(s), cols = span / 2, rows = 64;
        std::vector<std::uint16_t> global(rows * cols);
        for (std::uint32_t i = 0; i < global.size(); ++i) global[i] = static_cast<std::uint16_t>(i + 1);
        const TmaMap map =
            simt::make_tma_map(reinterpret_cast<std::byte*>(global.data()), 2, cols, rows, span, cols, rows, s);
        std::vector<std::uint8_t> tile(rows * span);
        simt::run_grid(dim3(1), dim3(32), 1024 + rows * span, [&] {
            std::uint64_t* bar = shared_memory<std::uint64_t>();
            std::byte* at = shared_memory<std::byte>() + 1024;
            if (threadIdx.x == 0) {
                mbarrier_init(bar, 1), fence_mbarrier_init();
                mbarrier_arrive(bar, rows * span);
                tma_load(&map, at, 0, 0, bar);
                mbarrier_wait_parity(bar, 0);
                std::memcpy(tile.data(), at, tile.size());
            }
        });
        auto value_at = [&](std::uint32_t address) {  // the tile starts at shared +1024; 0 outside it
            std::uint16_t v = 0;
            if (address >= 1024 && address + 2 <= 1024 + tile.size())
                std::memcpy(&v, tile.data() + (address - 1024), 2);
            return v;
        };
        for (std::uint32_t step = 0; step < cols / 16; ++step) {  // the k16 steps within the span
            const WgmmaOperand d{1024 + 32 * step, 16, 8 * span, 0, s};
            const WgmmaOperand wrong{1024 + 32 * step, 16, 8 * span, 0,
                                     s == Swizzle::b128 ? Swizzle::b64 : Swizzle::b128};
            int differ = 0;
            for (std::uint32_t r = 0; r < rows; ++r)
                for (std::uint32_t k = 0; k < 16; ++k) {
                    INFO("swizzle " << span << " step " << step << " element " << r << ", " << k);
                    REQUIRE(value_at(k_major_address(d, r, k, 2)) == global[r * cols + 16 * step + k]);
                    differ += value_at(k_major_address(wrong, r, k, 2)) != global[r * cols + 16 * step + k];
                }
            CHECK(differ > 0);
        }
    }
}

TEST_CASE("without swizzling, MN-major addresses are core matrices of 8 k x 16 bytes", "[gpu-host][wgmma]") {
    // the PTX ISA's canonical MN-major layout ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)), T = 8 BF16
    const WgmmaOperand d{4096, 256, 1024, 0, Swizzle::none};
    for (std::uint32_t mn = 0; mn < 64; ++mn)
        for (std::uint32_t k = 0; k < 16; ++k)
            REQUIRE(mn_major_address(d, mn, k, 2) ==
                    4096 + (mn / 8) * 1024 + (k / 8) * 256 + (k % 8) * 16 + (mn % 8) * 2);
}

TEST_CASE("a row-major [K][MN] tile a swizzled TMA load lands is an MN-major operand", "[gpu-host][wgmma][tma]") {
    // V as P V reads it: keys (K) as rows, the head dimension (N) contiguous, loaded in boxes one
    // span wide; the boxes lie LBO apart, 8-key groups one swizzle period (SBO) apart.
    for (const Swizzle s : {Swizzle::b32, Swizzle::b64, Swizzle::b128}) {
        const std::uint32_t span = swizzle_span(s), box_cols = span / 2, cols = 2 * box_cols, keys = 64;
        const std::uint32_t box_bytes = keys * span;
        std::vector<std::uint16_t> global(keys * cols);
        for (std::uint32_t i = 0; i < global.size(); ++i) global[i] = static_cast<std::uint16_t>(i + 1);
        const TmaMap map =
            simt::make_tma_map(reinterpret_cast<std::byte*>(global.data()), 2, cols, keys, 2 * span, box_cols, keys, s);
        std::vector<std::uint8_t> tile(2 * box_bytes);
        simt::run_grid(dim3(1), dim3(32), 1024 + 2 * box_bytes, [&] {
            std::uint64_t* bar = shared_memory<std::uint64_t>();
            std::byte* at = shared_memory<std::byte>() + 1024;
            if (threadIdx.x == 0) {
                mbarrier_init(bar, 1), fence_mbarrier_init();
                mbarrier_arrive(bar, 2 * box_bytes);
                tma_load(&map, at, 0, 0, bar);
                tma_load(&map, at + box_bytes, static_cast<std::int32_t>(box_cols), 0, bar);
                mbarrier_wait_parity(bar, 0);
                std::memcpy(tile.data(), at, tile.size());
            }
        });
        auto value_at = [&](std::uint32_t address) {
            std::uint16_t v = 0;
            if (address >= 1024 && address + 2 <= 1024 + tile.size())
                std::memcpy(&v, tile.data() + (address - 1024), 2);
            return v;
        };
        for (std::uint32_t step = 0; step < keys / 16; ++step) {
            const WgmmaOperand d{1024 + 16 * span * step, box_bytes, 8 * span, 0, s};
            int as_k_major = 0;
            for (std::uint32_t n = 0; n < cols; ++n)
                for (std::uint32_t k = 0; k < 16; ++k) {
                    const std::uint16_t want = global[(16 * step + k) * cols + n];
                    INFO("swizzle " << span << " step " << step << " element " << n << ", " << k);
                    REQUIRE(value_at(mn_major_address(d, n, k, 2)) == want);
                    as_k_major += value_at(k_major_address(d, n, k, 2)) != want;
                }
            CHECK(as_k_major > 0);  // the negative control: read K-major, the same descriptor reads other values
        }
    }
}
