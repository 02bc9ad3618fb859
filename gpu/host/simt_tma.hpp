#pragma once
// The simulated GPU's tensor memory accelerator (gpu/primitives/tma.hpp's host side): 2-D and 3-D tiled copies
// between global memory and shared memory, with the 32/64/128-byte swizzles and zeros for
// elements outside the tensor. Like the hardware's copy engine, a copy lands later than its
// issue: a load poisons its destination (every byte 0xFF: NaN in every float format) when it
// is issued and lands, completing its bytes on the mbarrier, only when a thread waits on that
// mbarrier; a store reads its shared-memory source only when its bulk group is waited for. So
// a missing wait reads poison or stores what was written after the store, and ThreadSanitizer
// sees the race.
#include <cstddef>
#include <cstdint>
#include <source_location>

#include "gpu/primitives/tma_swizzle.hpp"

namespace roundscope::gpu {

/// A 2-D or 3-D tiled view of global memory (a CUtensorMap's tiled mode): dims[0] elements of
/// `element_bytes` along the contiguous axis, dims[1] rows `row_bytes` apart, dims[2] planes
/// `plane_bytes` apart (1 plane: 2-D); boxes of box[0] x box[1] x box[2] elements, landed as
/// box[1] x box[2] rows of the box; `swizzle` of the shared-memory tile.
struct TmaMap {
    std::byte* base = nullptr;
    std::uint32_t element_bytes = 2;
    std::uint64_t dims[3] = {0, 0, 1};
    std::uint64_t row_bytes = 0, plane_bytes = 0;
    std::uint32_t box[3] = {0, 0, 1};
    Swizzle swizzle = Swizzle::none;
};

namespace simt {

/// The map checked as cuTensorMapEncodeTiled checks it: Error for a box wider than its
/// swizzle's span, over 256 elements a side, or whose row is not a multiple of 16 bytes; for a
/// tensor not 16-byte aligned, of an element size no data type has, a dimension of 0 or over
/// 2^32 elements, strides not a multiple of 16 or of 2^40 bytes or more, and rows or planes that
/// overlap (a stride shorter than what it spans).
TmaMap make_tma_map(std::byte* base, std::uint32_t element_bytes, std::uint64_t cols, std::uint64_t rows,
                    std::uint64_t row_bytes, std::uint32_t box_cols, std::uint32_t box_rows, Swizzle swizzle);
/// The same for a 3-D tensor (planes `plane_bytes` apart, a multiple of 16) and box.
TmaMap make_tma_map_3d(std::byte* base, std::uint32_t element_bytes, const std::uint64_t (&dims)[3],
                       std::uint64_t row_bytes, std::uint64_t plane_bytes, const std::uint32_t (&box)[3],
                       Swizzle swizzle);
void check_tma_map(const TmaMap& map);

/// cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.
/// (.3d with the plane coordinate c2; 2-D maps take c2 = 0.)
void tma_load(const TmaMap& map, void* shared_dst, std::int32_t c0, std::int32_t c1, std::int32_t c2,
              std::uint64_t* bar);
/// cp.async.bulk.tensor.2d/.3d.global.shared::cta.bulk_group, commit_group, wait_group(.read) n.
void tma_store(const TmaMap& map, const void* shared_src, std::int32_t c0, std::int32_t c1, std::int32_t c2);
/// st.shared of `bytes` at `shared_dst` by the calling thread, noted as a generic-proxy write a
/// TMA store may not read before the thread's fence_proxy_async_shared.
void store_shared_generic(void* shared_dst, const void* value, std::size_t bytes, std::source_location site);
/// fence.proxy.async.shared::cta.
void fence_proxy_async_shared();
void tma_store_commit();
void tma_store_wait(int pending_groups);
/// At the end of a simulated thread: its stores land (the hardware completes them).
void tma_flush_stores();

}  // namespace simt
}  // namespace roundscope::gpu
