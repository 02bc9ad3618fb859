#pragma once
// launch() for CUDA: the kernel with its dynamic shared memory allowed, every error checked,
// and the device synchronized (the twins are for checking bits, not for overlapping work);
// KernelTimer times what it launches with CUDA events.
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

/// While one lives, launch() times every kernel it runs with CUDA events recorded just before and
/// after it on the stream (the GPU's clock, as torch.cuda.Event: no host launch, attribute or
/// synchronisation cost) and adds the times up. One at a time, on the launching thread.
class KernelTimer {
public:
    KernelTimer() {
        check(cudaEventCreate(&start_), "cudaEventCreate");
        check(cudaEventCreate(&stop_), "cudaEventCreate");
        active() = this;
    }
    ~KernelTimer() {
        active() = nullptr;
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }
    KernelTimer(const KernelTimer&) = delete;
    KernelTimer& operator=(const KernelTimer&) = delete;

    /// The kernels' time since construction or the last reset, seconds.
    double seconds() const { return seconds_; }
    void reset() { seconds_ = 0; }

    static KernelTimer*& active() {
        static KernelTimer* timer = nullptr;
        return timer;
    }
    void before() { check(cudaEventRecord(start_), "cudaEventRecord"); }
    void after() { check(cudaEventRecord(stop_), "cudaEventRecord"); }
    void add() {  // after the device is synchronized
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
        seconds_ += double(ms) / 1e3;
    }

private:
    cudaEvent_t start_{}, stop_{};
    double seconds_ = 0;
};

template <class... Params, class... Args>
void launch(const char* what, void (*kernel)(Params...), dim3 grid, unsigned threads, std::size_t shared_bytes,
            const Args&... args) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)),
          "shared memory size");
    KernelTimer* timer = KernelTimer::active();
    if (timer) timer->before();
    kernel<<<grid, threads, shared_bytes>>>(args...);
    check(cudaGetLastError(), what);
    if (timer) timer->after();
    check(cudaDeviceSynchronize(), what);
    if (timer) timer->add();
}

}  // namespace roundscope::gpu
