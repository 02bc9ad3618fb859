#pragma once
// What a kernel body uses of CUDA's execution model, for both builds of the same source: under
// nvcc, CUDA's own built-ins; with ROUNDSCOPE_SIMT_HOST (gpu/host/), a simulated GPU whose
// blocks are sets of host threads. Kernel code writes ROUNDSCOPE_KERNEL for __global__,
// ROUNDSCOPE_DEVICE for __device__, sync_threads() for __syncthreads() and shared_memory<T>()
// for the dynamic `extern __shared__` array; threadIdx, blockIdx, blockDim and dim3 keep their
// CUDA names. ROUNDSCOPE_LAUNCH_BOUNDS, ROUNDSCOPE_GRID_CONSTANT and ROUNDSCOPE_UNROLL are
// nvcc's and nothing on the simulated GPU.
#if defined(ROUNDSCOPE_SIMT_HOST)

#include "gpu/host/simt_host.hpp"
#define ROUNDSCOPE_KERNEL
#define ROUNDSCOPE_DEVICE
#define ROUNDSCOPE_LAUNCH_BOUNDS(threads, blocks)
#define ROUNDSCOPE_GRID_CONSTANT const
#define ROUNDSCOPE_UNROLL

#else

#include <cuda_runtime.h>
#define ROUNDSCOPE_KERNEL __global__
#define ROUNDSCOPE_DEVICE __device__
#define ROUNDSCOPE_LAUNCH_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
// a kernel parameter whose address is taken (a TMA map): it stays in the parameter space
#define ROUNDSCOPE_GRID_CONSTANT const __grid_constant__
// a loop unrolled so that the register arrays it indexes stay in registers
#define ROUNDSCOPE_UNROLL _Pragma("unroll")

namespace roundscope::gpu {

__device__ inline void sync_threads() { __syncthreads(); }

template <class T>
__device__ T* shared_memory() {
    extern __shared__ __align__(16) unsigned char dynamic_shared_memory[];
    return reinterpret_cast<T*>(dynamic_shared_memory);
}

}  // namespace roundscope::gpu

#endif
