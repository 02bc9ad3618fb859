// Property: gpu/primitives/tma.hpp's 2-D and 3-D copies on the simulated GPU move each element of a box where the
// hardware does: a load puts element (i0, i1) of the box at (c0, c1) at byte i1 * row + i0 * size
// of the tile with its 16-byte chunk XORed by the swizzle (none, 32, 64, 128 bytes), zeros
// outside the tensor (past either end, and before it); a store writes the tile back through the
// same mapping and nothing outside the tensor. The copy engine's lateness is observable, as on a
// GPU: a tile read without the mbarrier wait is poison (every byte 0xFF), and a store reads its
// source when its group is waited for, not when it is issued. The map's and the tile's checks
// (a box wider than its swizzle, a misaligned swizzled tile) end the launch with one error. A 3-D
// box reads zeros past its plane's rows, not the next plane (heads as planes).
// A store of shared memory that a thread wrote (store_shared_u32) and did not fence for the copy
// engine (fence.proxy.async.shared::cta) fails the launch, naming the writer and where it wrote.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/host/simt_host.hpp"
#include "gpu/primitives/tma.hpp"
#include "lib/error.hpp"

using namespace roundscope;
using namespace roundscope::gpu;

namespace {

constexpr std::uint64_t cols = 104, rows = 70, row_bytes = 112 * 2;  // rows padded to 224 bytes

// A global tensor of uint16 whose element (c, r) is its own index + 1 (never 0 or 0xFFFF).
std::vector<std::uint16_t> tensor() {
    std::vector<std::uint16_t> t(rows * row_bytes / 2, 0);
    for (std::uint64_t r = 0; r < rows; ++r)
        for (std::uint64_t c = 0; c < cols; ++c)
            t[r * row_bytes / 2 + c] = static_cast<std::uint16_t>(r * cols + c + 1);
    return t;
}

// The byte offset of element (i0, i1) of a tile whose rows are `row` bytes, as the PTX ISA
// describes the swizzle: 128-byte lines, 16-byte chunks, chunk XOR (line mod 8), masked to the
// chunks of the span.
std::uint32_t tile_offset(std::uint32_t i0, std::uint32_t i1, std::uint32_t row, Swizzle s) {
    const std::uint32_t plain = i1 * row + i0 * 2, line = plain / 128, chunk = plain / 16 % 8;
    const std::uint32_t span_chunks = s == Swizzle::none ? 1 : swizzle_span(s) / 16;
    const std::uint32_t moved = chunk ^ (line % 8 & (span_chunks - 1));
    return plain - chunk * 16 + moved * 16;
}

struct Box {
    std::int32_t c0, c1;
};

}  // namespace

TEST_CASE("TMA loads put every element where the swizzle says, zeros outside the tensor",
          "[gpu-host][tma][sanitized]") {
    std::vector<std::uint16_t> global = tensor();
    const Box boxes[] = {{0, 0}, {8, 3}, {96, 60}, {-8, -5}, {100, 66}};  // inside, across the ends, before
    for (const Swizzle s : {Swizzle::none, Swizzle::b32, Swizzle::b64, Swizzle::b128}) {
        const std::uint32_t box_cols = s == Swizzle::none ? 24 : swizzle_span(s) / 2, box_rows = 20;
        const TmaMap map = simt::make_tma_map(reinterpret_cast<std::byte*>(global.data()), 2, cols, rows, row_bytes,
                                              box_cols, box_rows, s);
        const std::uint32_t tile_bytes = box_cols * box_rows * 2;
        std::vector<std::uint16_t> got(std::size(boxes) * tile_bytes / 2);
        simt::run_grid(dim3(1), dim3(64), 1024 + std::size(boxes) * 3072, [&] {
            std::uint64_t* bar = shared_memory<std::uint64_t>();
            std::byte* tiles = shared_memory<std::byte>() + 1024;
            if (threadIdx.x == 0) mbarrier_init(bar, 1), fence_mbarrier_init();
            sync_threads();
            if (threadIdx.x == 0) {
                mbarrier_arrive(bar, static_cast<std::uint32_t>(std::size(boxes)) * tile_bytes);
                for (std::size_t b = 0; b < std::size(boxes); ++b)
                    tma_load(&map, tiles + b * 3072, boxes[b].c0, boxes[b].c1, bar);  // 1024-aligned, apart
            }
            mbarrier_wait_parity(bar, 0);
            for (std::size_t i = threadIdx.x; i < got.size(); i += 64) {
                const std::size_t b = i / (tile_bytes / 2);
                got[i] = reinterpret_cast<const std::uint16_t*>(tiles + b * 3072)[i % (tile_bytes / 2)];
            }
        });
        for (std::size_t b = 0; b < std::size(boxes); ++b) {
            for (std::uint32_t i1 = 0; i1 < box_rows; ++i1) {
                for (std::uint32_t i0 = 0; i0 < box_cols; ++i0) {
                    const std::int64_t c = boxes[b].c0 + std::int64_t{i0}, r = boxes[b].c1 + std::int64_t{i1};
                    const bool inside =
                        c >= 0 && r >= 0 && c < static_cast<std::int64_t>(cols) && r < static_cast<std::int64_t>(rows);
                    const std::uint16_t want = inside ? static_cast<std::uint16_t>(r * cols + c + 1) : 0;
                    INFO("swizzle " << swizzle_span(s) << " box " << b << " element " << i0 << ", " << i1);
                    REQUIRE(got[b * tile_bytes / 2 + tile_offset(i0, i1, box_cols * 2, s) / 2] == want);
                }
            }
        }
    }
}

TEST_CASE("a TMA tile read without its mbarrier wait is poison", "[gpu-host][tma]") {
    std::vector<std::uint16_t> global = tensor();
    const TmaMap map =
        simt::make_tma_map(reinterpret_cast<std::byte*>(global.data()), 2, cols, rows, row_bytes, 64, 8, Swizzle::b128);
    std::vector<std::uint16_t> early(64), late(64);
    simt::run_grid(dim3(1), dim3(32), 1024 + 1024, [&] {
        std::uint64_t* bar = shared_memory<std::uint64_t>();
        auto* tile = reinterpret_cast<std::uint16_t*>(shared_memory<std::byte>() + 1024);
        if (threadIdx.x == 0) {
            mbarrier_init(bar, 1), fence_mbarrier_init();
            mbarrier_arrive(bar, 64 * 8 * 2);
            tma_load(&map, tile, 0, 0, bar);
            for (int i = 0; i < 64; ++i) early[i] = tile[i];  // no wait: the copy has not landed
            mbarrier_wait_parity(bar, 0);
            for (int i = 0; i < 64; ++i) late[i] = tile[i];
        }
    });
    for (int i = 0; i < 64; ++i) {
        CHECK(early[i] == 0xFFFF);
        CHECK(late[i] == tensor()[tile_offset(static_cast<std::uint32_t>(i), 0, 128, Swizzle::b128) / 2]);
    }
}

TEST_CASE("TMA stores write the tile through the swizzle, nothing outside the tensor, read when waited for",
          "[gpu-host][tma][sanitized]") {
    const std::vector<std::uint16_t> source = tensor();
    std::vector<std::uint16_t> target(source.size(), 0);
    const TmaMap out =
        simt::make_tma_map(reinterpret_cast<std::byte*>(target.data()), 2, cols, rows, row_bytes, 32, 16, Swizzle::b64);
    simt::run_grid(dim3(1), dim3(32), 1024 + 1024, [&] {
        auto* tile = reinterpret_cast<std::uint16_t*>(shared_memory<std::byte>() + 1024);
        if (threadIdx.x != 0) return;
        // tile element (i0, i1) holds the value the tensor has at (96 + i0, 60 + i1)
        for (std::uint32_t i1 = 0; i1 < 16; ++i1)
            for (std::uint32_t i0 = 0; i0 < 32; ++i0)
                tile[tile_offset(i0, i1, 64, Swizzle::b64) / 2] =
                    static_cast<std::uint16_t>((60 + i1) * cols + 96 + i0 + 1);
        fence_async_shared();
        tma_store(&out, tile, 96, 60);  // 8 columns and 10 rows inside
        tma_store_commit();
        tile[0] = 7;  // written before the wait: the engine reads it when the group is waited for
        tma_store_wait_read<0>();
        tile[1] = 9;  // after the wait: not stored
    });
    for (std::uint64_t r = 0; r < rows; ++r) {
        for (std::uint64_t c = 0; c < cols; ++c) {
            const bool stored = r >= 60 && c >= 96;
            const std::uint16_t want = r == 60 && c == 96 ? 7 : stored ? source[r * row_bytes / 2 + c] : 0;
            INFO("element " << c << ", " << r);
            REQUIRE(target[r * row_bytes / 2 + c] == want);
        }
    }
}

TEST_CASE("a TMA store of shared memory a thread wrote without fence.proxy.async fails the launch",
          "[gpu-host][tma][misuse]") {
    std::vector<std::uint16_t> target(rows * row_bytes / 2, 0);
    const TmaMap out =
        simt::make_tma_map(reinterpret_cast<std::byte*>(target.data()), 2, cols, rows, row_bytes, 64, 2, Swizzle::none);
    // 32 threads write the 256-byte tile a word each (st.shared), fence unless they are `unfenced`,
    // meet, and thread 0 stores it; a word written past the tile is no store's business
    for (const int unfenced : {-1, 5}) {
        for (const bool outside : {false, true}) {
            std::string m;
            try {
                simt::run_grid(dim3(1), dim3(32), 1024 + 1024, [&] {
                    std::byte* tile = shared_memory<std::byte>() + 1024;
                    const unsigned t = threadIdx.x;
                    store_shared_u32(tile + (outside && static_cast<int>(t) == unfenced ? 256 + 4 * t : 4 * t),
                                     0x00010002u * (t + 1));
                    if (static_cast<int>(t) != unfenced) fence_async_shared();
                    sync_threads();
                    if (t == 0) {
                        tma_store(&out, tile, 0, 0);
                        tma_store_commit();
                        tma_store_wait_read<0>();
                    }
                });
            } catch (const Error& e) {
                m = e.what();
            }
            INFO(m);
            const bool fails = unfenced >= 0 && !outside;
            CHECK(m.empty() == !fails);
            if (fails) {
                CHECK_THAT(
                    m, Catch::Contains("a TMA store by thread 0 reads shared +1024..+1280, which thread 5 wrote") &&
                           Catch::Contains("no fence.proxy.async.shared::cta") && Catch::Contains("test_tma_host.cpp"));
            }
        }
    }
}

TEST_CASE("TMA maps and tiles the hardware refuses", "[gpu-host][tma]") {
    std::vector<std::uint16_t> global = tensor();
    auto* base = reinterpret_cast<std::byte*>(global.data());
    CHECK_THROWS_WITH(simt::make_tma_map(base, 2, cols, rows, row_bytes, 128, 8, Swizzle::b128),
                      Catch::Contains("wider than its 128-byte swizzle"));
    CHECK_THROWS_WITH(simt::make_tma_map(base, 2, cols, rows, 210, 64, 8, Swizzle::none),
                      Catch::Contains("not a multiple of 16"));
    CHECK_THROWS_WITH(simt::make_tma_map(base + 8, 2, cols, rows, row_bytes, 64, 8, Swizzle::none),
                      Catch::Contains("not 16-byte aligned"));
    CHECK_THROWS_WITH(simt::make_tma_map(base, 3, cols, rows, row_bytes, 16, 8, Swizzle::none),
                      Catch::Contains("no data type has 3-byte elements"));
    CHECK_THROWS_WITH(simt::make_tma_map(base, 2, 0, rows, row_bytes, 64, 8, Swizzle::none),
                      Catch::Contains("a dimension of 0 elements"));
    CHECK_THROWS_WITH(simt::make_tma_map(base, 2, cols, rows, row_bytes - 32, 64, 8, Swizzle::none),
                      Catch::Contains("rows " + std::to_string(row_bytes - 32) + " bytes apart hold"));
    CHECK_THROWS_WITH(simt::make_tma_map(base, 2, cols, rows, std::uint64_t{1} << 40, 64, 8, Swizzle::none),
                      Catch::Contains("2^40"));
    {
        const std::uint64_t dims[3] = {cols, rows, 2};
        const std::uint32_t box[3] = {64, 8, 1};
        CHECK_THROWS_WITH(simt::make_tma_map_3d(base, 2, dims, row_bytes, row_bytes * (rows - 1), box, Swizzle::none),
                          Catch::Contains("planes"));
    }
    const TmaMap map = simt::make_tma_map(base, 2, cols, rows, row_bytes, 64, 8, Swizzle::b128);
    std::string m;
    try {
        simt::run_grid(dim3(1), dim3(32), 4096, [&] {
            std::uint64_t* bar = shared_memory<std::uint64_t>();
            if (threadIdx.x != 0) return;
            mbarrier_init(bar, 1), fence_mbarrier_init();
            tma_load(&map, shared_memory<std::byte>() + 512, 0, 0, bar);  // a 128-byte swizzle needs 1024
        });
    } catch (const Error& e) {
        m = e.what();
    }
    CHECK_THAT(m, Catch::Contains("not aligned to 1024 bytes") && Catch::Contains("+512"));
    // an mbarrier's init not fenced for the copy engine (fence.mbarrier_init) before a copy uses it
    for (const bool fenced : {true, false}) {
        m.clear();
        try {
            simt::run_grid(dim3(1), dim3(32), 2048, [&] {
                std::uint64_t* bar = shared_memory<std::uint64_t>();
                if (threadIdx.x != 0) return;
                mbarrier_init(bar, 1);
                if (fenced) fence_mbarrier_init();
                mbarrier_arrive(bar, 64 * 8 * 2);
                tma_load(&map, shared_memory<std::byte>() + 1024, 0, 0, bar);
                mbarrier_wait_parity(bar, 0);
            });
        } catch (const Error& e) {
            m = e.what();
        }
        INFO(m);
        CHECK(m.empty() == fenced);
        if (!fenced) CHECK_THAT(m, Catch::Contains("did not fence its init (fence.mbarrier_init)"));
    }
}

TEST_CASE("3-D TMA boxes stay within their plane: zeros past a plane's rows, not the next plane's",
          "[gpu-host][tma][sanitized]") {
    // heads as planes: [3][rows][cols], a box of 2 planes x 20 rows at the end of plane 1 (rows
    // 60..79 of 70), as a kernel's last KV tile of a head
    constexpr std::uint64_t planes = 3, plane = rows * row_bytes;
    std::vector<std::uint16_t> global(planes * plane / 2, 0);
    for (std::uint64_t h = 0; h < planes; ++h)
        for (std::uint64_t r = 0; r < rows; ++r)
            for (std::uint64_t c = 0; c < cols; ++c)
                global[(h * plane + r * row_bytes) / 2 + c] = static_cast<std::uint16_t>((h * rows + r) * cols + c + 1);
    const std::uint32_t box[3] = {64, 20, 2};
    const std::uint64_t dims[3] = {cols, rows, planes};
    const TmaMap map = simt::make_tma_map_3d(reinterpret_cast<std::byte*>(global.data()), 2, dims, row_bytes, plane,
                                             box, Swizzle::b128);
    const std::uint32_t tile_bytes = 64 * 20 * 2 * 2;
    std::vector<std::uint16_t> got(tile_bytes / 2);
    simt::run_grid(dim3(1), dim3(32), 1024 + tile_bytes, [&] {
        auto* bar = shared_memory<std::uint64_t>();
        std::byte* tile = shared_memory<std::byte>() + 1024;
        if (threadIdx.x == 0) {
            mbarrier_init(bar, 1), fence_mbarrier_init();
            mbarrier_arrive(bar, tile_bytes);
            tma_load(&map, tile, 40, 60, 1, bar);
            mbarrier_wait_parity(bar, 0);
            std::memcpy(got.data(), tile, tile_bytes);
        }
    });
    int wrong = 0;
    for (std::uint32_t p = 0; p < 2; ++p)
        for (std::uint32_t r = 0; r < 20; ++r)
            for (std::uint32_t c = 0; c < 64; ++c) {
                const std::uint64_t h = 1 + p, gr = 60 + r, gc = 40 + c;
                const std::uint16_t want = gr < rows && gc < cols ? global[(h * plane + gr * row_bytes) / 2 + gc] : 0;
                wrong += got[tile_offset(c, p * 20 + r, 128, Swizzle::b128) / 2] != want;
            }
    CHECK(wrong == 0);
}
