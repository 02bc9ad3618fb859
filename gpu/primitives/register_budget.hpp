#pragma once
// setmaxnreg for kernel code: a warpgroup gives back registers (a producer that only issues
// copies) or takes them (consumers holding accumulators), so that a block's register file is
// split unevenly between its warpgroups. Every thread of the warpgroup executes it. Under nvcc
// the PTX instruction (sm_90a); on the simulated GPU the block's register pool is accounted
// (gpu/host/simt_sync.hpp): an increase waits for registers a decrease returned, so a split that
// does not balance deadlocks there too instead of first on the GPU.
#include "gpu/primitives/simt.hpp"
#include "gpu/primitives/sync.hpp"

namespace roundscope::gpu {

/// setmaxnreg.inc.sync.aligned.u32 N: the warpgroup's threads may hold up to N registers.
template <int N>
ROUNDSCOPE_DEVICE inline void warpgroup_registers_increase(SyncSite site = SyncSite::current()) {
    static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24 to 256 registers, a multiple of 8");
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::current_block().sync.set_max_registers(simt::linear_thread(), N, true, site);
#else
    (void)site;
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

/// setmaxnreg.dec.sync.aligned.u32 N: the warpgroup's threads hold at most N registers.
template <int N>
ROUNDSCOPE_DEVICE inline void warpgroup_registers_decrease(SyncSite site = SyncSite::current()) {
    static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24 to 256 registers, a multiple of 8");
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::current_block().sync.set_max_registers(simt::linear_thread(), N, false, site);
#else
    (void)site;
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

}  // namespace roundscope::gpu
