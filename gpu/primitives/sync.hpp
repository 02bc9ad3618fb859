#pragma once
// Block-level synchronisation for kernel code, one spelling for both builds: under nvcc, the
// PTX instructions (inline asm); with ROUNDSCOPE_SIMT_HOST, the simulated GPU's
// (gpu/host/simt_sync.hpp), which checks their use and reports a deadlock with every thread's
// wait site. Named barriers (bar.sync / bar.arrive, id 0-15, a thread count of whole warps;
// __syncthreads is bar.sync 0 with the whole block) and mbarriers in shared memory (a uint64_t:
// init with an arrival count; arrive, optionally announcing bytes a copy will complete; the
// copy's complete_tx; wait for a phase's parity).
#include <cstdint>

#include "gpu/primitives/simt.hpp"

#if defined(ROUNDSCOPE_SIMT_HOST)
#include <source_location>

#include "gpu/host/simt_wgmma.hpp"
#endif

namespace roundscope::gpu {

#if defined(ROUNDSCOPE_SIMT_HOST)
using SyncSite = std::source_location;  // where a simulated thread waits, for the deadlock report
#else
struct SyncSite {
    static constexpr SyncSite current() { return {}; }
};
#endif

/// bar.sync id, count: waits until `count` threads (whole warps) have arrived at barrier `id`.
ROUNDSCOPE_DEVICE inline void named_barrier_sync(unsigned id, unsigned count, SyncSite site = SyncSite::current()) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::current_block().sync.named_barrier(simt::linear_thread(), id, count, true, site);
#else
    (void)site;
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
#endif
}

/// bar.arrive id, count: counts the caller's arrival at barrier `id` without waiting (a
/// producer signalling the consumers that bar.sync on it).
ROUNDSCOPE_DEVICE inline void named_barrier_arrive(unsigned id, unsigned count, SyncSite site = SyncSite::current()) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::current_block().sync.named_barrier(simt::linear_thread(), id, count, false, site);
#else
    (void)site;
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
#endif
}

/// The shared-memory address of `p` (in the block's shared window): what descriptors and the
/// asynchronous copies take. On the simulated GPU, the offset in the block's shared memory.
ROUNDSCOPE_DEVICE inline std::uint32_t shared_address(const void* p) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    return simt::shared_offset(p);
#else
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
#endif
}

/// mbarrier.init: phase 0 begins, waiting for `count` arrivals.
ROUNDSCOPE_DEVICE inline void mbarrier_init(std::uint64_t* bar, unsigned count) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::current_block().sync.mbarrier_init(simt::linear_thread(), bar, count);
#else
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count) : "memory");
#endif
}

/// fence.mbarrier_init.release.cluster: the mbarriers the thread initialised become visible to the
/// copy engine (the async proxy), which completes TMA copies on them. As CUTLASS's pipelines do,
/// the initialising thread issues it after its inits and before the barrier that publishes them.
ROUNDSCOPE_DEVICE inline void fence_mbarrier_init() {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::current_block().sync.fence_mbarrier_init(simt::linear_thread());
#else
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

/// mbarrier.arrive(.expect_tx): one arrival, after announcing `tx` bytes that copies will
/// complete (complete_tx) before the phase can end.
ROUNDSCOPE_DEVICE inline void mbarrier_arrive(std::uint64_t* bar, std::uint32_t tx = 0,
                                              SyncSite site = SyncSite::current()) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::current_block().sync.mbarrier_arrive(simt::linear_thread(), bar, tx, site, simt::wgmma_shared_reads(),
                                               simt::wgmma_completed_groups());
#else
    (void)site;
    if (tx == 0)
        asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
    else
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(tx)
                     : "memory");
#endif
}

/// mbarrier.complete_tx: `bytes` of the phase's announced transactions done (what a TMA copy
/// signals when its data has landed).
ROUNDSCOPE_DEVICE inline void mbarrier_complete_tx(std::uint64_t* bar, std::uint32_t bytes,
                                                   SyncSite site = SyncSite::current()) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::current_block().sync.mbarrier_complete_tx(simt::linear_thread(), bar, bytes, site);
#else
    (void)site;
    asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes) : "memory");
#endif
}

/// mbarrier.try_wait.parity: whether the phase of parity `parity` has completed.
ROUNDSCOPE_DEVICE inline bool mbarrier_try_wait_parity(std::uint64_t* bar, unsigned parity,
                                                       SyncSite site = SyncSite::current()) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    return simt::current_block().sync.mbarrier_try_wait_parity(simt::linear_thread(), bar, parity, site);
#else
    (void)site;
    std::uint32_t done = 0;
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(shared_address(bar)), "r"(parity)
                 : "memory");
    return done != 0;
#endif
}

/// Waits until the phase of parity `parity` has completed.
ROUNDSCOPE_DEVICE inline void mbarrier_wait_parity(std::uint64_t* bar, unsigned parity,
                                                   SyncSite site = SyncSite::current()) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::current_block().sync.mbarrier_wait_parity(simt::linear_thread(), bar, parity, site);
#else
    while (!mbarrier_try_wait_parity(bar, parity, site)) {
    }
#endif
}

}  // namespace roundscope::gpu
