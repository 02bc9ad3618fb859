#include "gpu/host/simt_tma.hpp"

#include <fmt/format.h>

#include <cstring>
#include <deque>
#include <functional>
#include <vector>

#include "gpu/host/simt_host.hpp"
#include "lib/error.hpp"

namespace roundscope::gpu::simt {
namespace {

std::size_t box_bytes(const TmaMap& map) {
    return std::size_t{map.box[0]} * map.box[1] * map.box[2] * map.element_bytes;
}

// Each element of the box at (c0, c1, c2) in turn: its byte offset in the (swizzled) shared
// tile and its address in global memory, or null outside the tensor.
template <class F>
void for_each_element(const TmaMap& map, std::int32_t c0, std::int32_t c1, std::int32_t c2, F f) {
    const std::uint32_t e = map.element_bytes, row = map.box[0] * e;
    auto inside = [](std::int64_t g, std::uint64_t dim) { return g >= 0 && static_cast<std::uint64_t>(g) < dim; };
    for (std::uint32_t i2 = 0; i2 < map.box[2]; ++i2) {
        for (std::uint32_t i1 = 0; i1 < map.box[1]; ++i1) {
            for (std::uint32_t i0 = 0; i0 < map.box[0]; ++i0) {
                const std::int64_t g0 = std::int64_t{c0} + i0, g1 = std::int64_t{c1} + i1, g2 = std::int64_t{c2} + i2;
                std::byte* global = inside(g0, map.dims[0]) && inside(g1, map.dims[1]) && inside(g2, map.dims[2])
                                        ? map.base + static_cast<std::uint64_t>(g2) * map.plane_bytes +
                                              static_cast<std::uint64_t>(g1) * map.row_bytes +
                                              static_cast<std::uint64_t>(g0) * e
                                        : nullptr;
                f(swizzled((i2 * map.box[1] + i1) * row + i0 * e, map.swizzle), global);
            }
        }
    }
}

void check_destination(const TmaMap& map, const void* shared) {
    const auto address = reinterpret_cast<std::uintptr_t>(shared);
    if (address % swizzle_alignment(map.swizzle) != 0)
        throw Error(fmt::format("TMA: a shared-memory tile at +{} is not aligned to {} bytes, as its swizzle needs",
                                static_cast<const std::byte*>(shared) - current_block().shared,
                                swizzle_alignment(map.swizzle)));
}

// The calling simulated thread's bulk groups of stores, oldest first; the last is open.
thread_local std::deque<std::vector<std::function<void()>>> store_groups;

}  // namespace

void check_tma_map(const TmaMap& map) {
    const std::uint32_t row = map.box[0] * map.element_bytes;
    if (map.base == nullptr || map.element_bytes == 0 || map.box[0] == 0 || map.box[1] == 0 || map.box[2] == 0)
        throw Error("TMA map: no tensor, element size or box");
    if (reinterpret_cast<std::uintptr_t>(map.base) % 16 != 0)
        throw Error("TMA map: the tensor's address is not 16-byte aligned");
    if (map.element_bytes != 1 && map.element_bytes != 2 && map.element_bytes != 4 && map.element_bytes != 8)
        throw Error(fmt::format("TMA map: no data type has {}-byte elements", map.element_bytes));
    for (const std::uint64_t dim : map.dims)
        if (dim == 0 || dim > (std::uint64_t{1} << 32))
            throw Error(fmt::format("TMA map: a dimension of {} elements is not in 1 to 2^32", dim));
    if (map.row_bytes >= (std::uint64_t{1} << 40) || map.plane_bytes >= (std::uint64_t{1} << 40))
        throw Error("TMA map: a stride of 2^40 bytes or more");
    // each stride spans the dimensions below it: rows and planes do not overlap
    if (map.dims[1] > 1 && map.row_bytes < map.dims[0] * map.element_bytes)
        throw Error(fmt::format("TMA map: rows {} bytes apart hold {} bytes each", map.row_bytes,
                                map.dims[0] * map.element_bytes));
    if (map.dims[2] > 1 && map.plane_bytes < map.dims[1] * map.row_bytes)
        throw Error(fmt::format("TMA map: planes {} bytes apart hold {} bytes each", map.plane_bytes,
                                map.dims[1] * map.row_bytes));
    if (map.box[0] > 256 || map.box[1] > 256 || map.box[2] > 256)
        throw Error(
            fmt::format("TMA map: a box of {} x {} x {} elements exceeds 256", map.box[0], map.box[1], map.box[2]));
    if (map.dims[2] > 1 && map.plane_bytes % 16 != 0)
        throw Error(fmt::format("TMA map: planes {} bytes apart, not a multiple of 16", map.plane_bytes));
    if (row % 16 != 0) throw Error(fmt::format("TMA map: a box row of {} bytes is not a multiple of 16", row));
    if (map.row_bytes % 16 != 0)
        throw Error(fmt::format("TMA map: rows {} bytes apart, not a multiple of 16", map.row_bytes));
    if (map.swizzle != Swizzle::none && row > swizzle_span(map.swizzle))
        throw Error(fmt::format("TMA map: a box row of {} bytes is wider than its {}-byte swizzle", row,
                                swizzle_span(map.swizzle)));
}

TmaMap make_tma_map(std::byte* base, std::uint32_t element_bytes, std::uint64_t cols, std::uint64_t rows,
                    std::uint64_t row_bytes, std::uint32_t box_cols, std::uint32_t box_rows, Swizzle swizzle) {
    TmaMap m;
    m.base = base, m.element_bytes = element_bytes, m.dims[0] = cols, m.dims[1] = rows, m.row_bytes = row_bytes;
    m.box[0] = box_cols, m.box[1] = box_rows, m.swizzle = swizzle;
    check_tma_map(m);
    return m;
}

TmaMap make_tma_map_3d(std::byte* base, std::uint32_t element_bytes, const std::uint64_t (&dims)[3],
                       std::uint64_t row_bytes, std::uint64_t plane_bytes, const std::uint32_t (&box)[3],
                       Swizzle swizzle) {
    TmaMap m;
    m.base = base, m.element_bytes = element_bytes, m.row_bytes = row_bytes, m.plane_bytes = plane_bytes;
    for (int i = 0; i < 3; ++i) m.dims[i] = dims[i], m.box[i] = box[i];
    m.swizzle = swizzle;
    check_tma_map(m);
    return m;
}

void tma_load(const TmaMap& map, void* shared_dst, std::int32_t c0, std::int32_t c1, std::int32_t c2,
              std::uint64_t* bar) {
    check_tma_map(map);
    check_destination(map, shared_dst);
    auto* dst = static_cast<std::byte*>(shared_dst);
    const auto at = shared_offset(dst), bytes = static_cast<std::uint32_t>(box_bytes(map));
    current_block().sync.check_shared_write(linear_thread(), {at, at + bytes}, "a TMA load");
    std::memset(dst, 0xFF, bytes);  // poisoned until the copy lands
    const TmaMap m = map;
    current_block().sync.add_copy(bar, static_cast<std::uint32_t>(box_bytes(map)), [m, dst, c0, c1, c2] {
        for_each_element(m, c0, c1, c2, [&](std::uint32_t offset, const std::byte* global) {
            if (global != nullptr)
                std::memcpy(dst + offset, global, m.element_bytes);
            else
                std::memset(dst + offset, 0, m.element_bytes);
        });
    });
}

void tma_store(const TmaMap& map, const void* shared_src, std::int32_t c0, std::int32_t c1, std::int32_t c2) {
    check_tma_map(map);
    check_destination(map, shared_src);
    const auto at = shared_offset(shared_src), bytes = static_cast<std::uint32_t>(box_bytes(map));
    current_block().sync.check_async_read(linear_thread(), {at, at + bytes}, "a TMA store");
    if (store_groups.empty()) store_groups.emplace_back();
    const TmaMap m = map;
    const auto* src = static_cast<const std::byte*>(shared_src);
    store_groups.back().push_back([m, src, c0, c1, c2] {
        for_each_element(m, c0, c1, c2, [&](std::uint32_t offset, std::byte* global) {
            if (global != nullptr) std::memcpy(global, src + offset, m.element_bytes);
        });
    });
}

void store_shared_generic(void* shared_dst, const void* value, std::size_t bytes, std::source_location site) {
    const auto at = shared_offset(shared_dst);
    std::memcpy(shared_dst, value, bytes);
    current_block().sync.generic_shared_write(linear_thread(), {at, at + static_cast<std::uint32_t>(bytes)}, site);
}

void fence_proxy_async_shared() { current_block().sync.fence_proxy_async(linear_thread()); }

void tma_store_commit() { store_groups.emplace_back(); }

void tma_store_wait(int pending_groups) {
    // the open group is not committed: it does not count, and is not waited for
    std::size_t committed = store_groups.empty() ? 0 : store_groups.size() - 1;
    while (committed > static_cast<std::size_t>(std::max(pending_groups, 0))) {
        for (const auto& store : store_groups.front()) store();
        store_groups.pop_front();
        --committed;
    }
}

void tma_flush_stores() {
    for (const auto& group : store_groups)
        for (const auto& store : group) store();
    store_groups.clear();
}

}  // namespace roundscope::gpu::simt
