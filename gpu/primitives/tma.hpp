#pragma once
// TMA copies for kernel code, one spelling for both builds: under nvcc, cp.async.bulk.tensor
// (inline PTX; the map a CUtensorMap in global or constant memory); with ROUNDSCOPE_SIMT_HOST,
// the simulated copy engine (gpu/host/simt_tma.hpp), whose copies land late so that a missing
// wait shows. 2-D tiled copies: a load completes its box's bytes on an mbarrier that the issuer
// announced them to (mbarrier_arrive(bar, bytes)); stores go in bulk groups, committed and
// waited for. 2-D and 3-D boxes. Shared-memory tiles are swizzled as the map says
// (gpu/primitives/tma_swizzle.hpp).
#include <cstdint>

#include "gpu/primitives/simt.hpp"
#include "gpu/primitives/sync.hpp"
#include "gpu/primitives/tma_swizzle.hpp"

#if defined(ROUNDSCOPE_SIMT_HOST)
#include "gpu/host/simt_tma.hpp"
#else
#include <cuda.h>
#endif

namespace roundscope::gpu {

#if !defined(ROUNDSCOPE_SIMT_HOST)
using TmaMap = CUtensorMap;
#endif

/// Loads the box at element coordinates (c0, c1) into `shared_dst`; its bytes complete on `bar`.
ROUNDSCOPE_DEVICE inline void tma_load(const TmaMap* map, void* shared_dst, std::int32_t c0, std::int32_t c1,
                                       std::uint64_t* bar) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::tma_load(*map, shared_dst, c0, c1, 0, bar);
#else
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            shared_address(shared_dst)),
        "l"(map), "r"(c0), "r"(c1), "r"(shared_address(bar))
        : "memory");
#endif
}

/// Stores the tile at `shared_src` to the box at (c0, c1), in the thread's open bulk group.
ROUNDSCOPE_DEVICE inline void tma_store(const TmaMap* map, const void* shared_src, std::int32_t c0, std::int32_t c1) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::tma_store(*map, shared_src, c0, c1, 0);
#else
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(map), "r"(c0),
                 "r"(c1), "r"(shared_address(shared_src))
                 : "memory");
#endif
}

/// The same for a 3-D map: the box at (c0, c1, c2).
ROUNDSCOPE_DEVICE inline void tma_load(const TmaMap* map, void* shared_dst, std::int32_t c0, std::int32_t c1,
                                       std::int32_t c2, std::uint64_t* bar) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::tma_load(*map, shared_dst, c0, c1, c2, bar);
#else
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
        "[%5];" ::"r"(shared_address(shared_dst)),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(shared_address(bar))
        : "memory");
#endif
}

ROUNDSCOPE_DEVICE inline void tma_store(const TmaMap* map, const void* shared_src, std::int32_t c0, std::int32_t c1,
                                        std::int32_t c2) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::tma_store(*map, shared_src, c0, c1, c2);
#else
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];" ::"l"(map), "r"(c0),
                 "r"(c1), "r"(c2), "r"(shared_address(shared_src))
                 : "memory");
#endif
}

/// cp.async.bulk.commit_group: closes the open bulk group.
ROUNDSCOPE_DEVICE inline void tma_store_commit() {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::tma_store_commit();
#else
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

/// cp.async.bulk.wait_group.read N: until at most N committed groups still read shared memory.
template <int N>
ROUNDSCOPE_DEVICE inline void tma_store_wait_read() {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::tma_store_wait(N);
#else
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
#endif
}

/// fence.proxy.async.shared::cta: the calling thread's shared-memory writes become visible to the
/// copy engine (before a TMA store of them). The simulated GPU checks it for the writes made by
/// store_shared_u32: a TMA store reading one that its writer did not fence fails the launch.
ROUNDSCOPE_DEVICE inline void fence_async_shared() {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::fence_proxy_async_shared();
#else
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

/// A 4-byte shared-memory store (st.shared.b32) of what a TMA store will read: on the simulated
/// GPU it is noted, so that a missing fence_async_shared is an error, not a silent race.
#if defined(ROUNDSCOPE_SIMT_HOST)
inline void store_shared_u32(void* at, std::uint32_t value,
                             std::source_location site = std::source_location::current()) {
    simt::store_shared_generic(at, &value, 4, site);
}
#else
ROUNDSCOPE_DEVICE inline void store_shared_u32(void* at, std::uint32_t value) {
    *static_cast<std::uint32_t*>(at) = value;
}
#endif

}  // namespace roundscope::gpu
