#pragma once
// launch() for CUDA: the kernel with its dynamic shared memory allowed, every error checked,
// and the device synchronized (the twins are for checking bits, not for overlapping work).
#include <cstddef>

#include "gpu/device_buffer.hpp"

namespace roundscope::gpu {

template <class... Params, class... Args>
void launch(const char* what, void (*kernel)(Params...), dim3 grid, unsigned threads, std::size_t shared_bytes,
            const Args&... args) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)),
          "shared memory size");
    kernel<<<grid, threads, shared_bytes>>>(args...);
    check(cudaGetLastError(), what);
    check(cudaDeviceSynchronize(), what);
}

}  // namespace roundscope::gpu
