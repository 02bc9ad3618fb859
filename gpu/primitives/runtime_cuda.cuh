#pragma once
// launch() for CUDA: the kernel with its dynamic shared memory allowed, every error checked,
// and the device synchronized (the twins are for checking bits, not for overlapping work).
#include <cstddef>
#include <string>

#include "gpu/primitives/device_arch.hpp"
#include "gpu/primitives/device_buffer.hpp"

namespace roundscope::gpu {

/// What a launch may use on the device the kernels run on (device 0).
struct DeviceLimits {
    std::string name;                  // "NVIDIA H100 80GB HBM3"
    std::string arch;                  // the tensor-core model's architecture: "sm90", ...
    std::size_t shared_per_block = 0;  // dynamic shared memory a block may opt in to, bytes
};

inline DeviceLimits device_limits() {
    int device = 0, major = 0, minor = 0, shared = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "compute capability");
    check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "compute capability");
    check(cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "shared memory limit");
    return {prop.name, model_arch(10 * major + minor), static_cast<std::size_t>(shared)};
}

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
