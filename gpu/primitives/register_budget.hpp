#pragma once
// setmaxnreg for kernel code: a warpgroup gives back registers (a producer that only issues
// copies) or takes them (consumers holding accumulators), so that a block's register file is
// split unevenly between its warpgroups. Every thread of the warpgroup executes it. Under nvcc
// the PTX instruction (sm_90a); on the simulated GPU nothing (registers are host variables).
#include "gpu/primitives/simt.hpp"

namespace roundscope::gpu {

/// setmaxnreg.inc.sync.aligned.u32 N: the warpgroup's threads may hold up to N registers.
template <int N>
ROUNDSCOPE_DEVICE inline void warpgroup_registers_increase() {
    static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24 to 256 registers, a multiple of 8");
#if !defined(ROUNDSCOPE_SIMT_HOST)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

/// setmaxnreg.dec.sync.aligned.u32 N: the warpgroup's threads hold at most N registers.
template <int N>
ROUNDSCOPE_DEVICE inline void warpgroup_registers_decrease() {
    static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24 to 256 registers, a multiple of 8");
#if !defined(ROUNDSCOPE_SIMT_HOST)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

}  // namespace roundscope::gpu
