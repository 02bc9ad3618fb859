#pragma once
// The simulated GPU's runtime: "device" memory is host memory, and launch() runs the kernel on
// simulated threads (gpu/host/simt_host.hpp).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gpu/host/simt_host.hpp"

namespace roundscope::gpu {

template <class T>
class DeviceBuffer {
public:
    explicit DeviceBuffer(std::size_t n) : data_(n + 1) {}
    T* get() const { return const_cast<T*>(data_.data()); }
    void upload(const T* host) { std::memcpy(data_.data(), host, (data_.size() - 1) * sizeof(T)); }
    void download(T* host) const { std::memcpy(host, data_.data(), (data_.size() - 1) * sizeof(T)); }
    void zero() { std::fill(data_.begin(), data_.end(), T{}); }
    void poison() { std::memset(static_cast<void*>(data_.data()), 0xFF, data_.size() * sizeof(T)); }

private:
    std::vector<T> data_;  // one element more, as the CUDA buffer allocates a byte more: never empty
};

struct DeviceLimits {
    std::string name;
    std::string arch;
    std::size_t shared_per_block = 0;
};

/// The simulated GPU: the simulated architecture's models, shared memory without a limit.
inline DeviceLimits device_limits() {
    return {"simulated GPU (" + simt::simulated_architecture() + ")", simt::simulated_architecture(),
            std::numeric_limits<std::size_t>::max()};
}

/// CUDA's KernelTimer (runtime_cuda.cuh) on the simulated GPU: the host's wall clock around each
/// simulated grid.
class KernelTimer {
public:
    KernelTimer() { active() = this; }
    ~KernelTimer() { active() = nullptr; }
    KernelTimer(const KernelTimer&) = delete;
    KernelTimer& operator=(const KernelTimer&) = delete;

    double seconds() const { return seconds_; }
    void reset() { seconds_ = 0; }

    static KernelTimer*& active() {
        static KernelTimer* timer = nullptr;
        return timer;
    }
    void add(double seconds) { seconds_ += seconds; }

private:
    double seconds_ = 0;
};

template <class... Params, class... Args>
void launch(const char*, void (*kernel)(Params...), dim3 grid, unsigned threads, std::size_t shared_bytes,
            const Args&... args) {
    const auto start = std::chrono::steady_clock::now();
    simt::run_grid(grid, dim3(threads), shared_bytes, [&] { kernel(args...); });
    if (KernelTimer* timer = KernelTimer::active())
        timer->add(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace roundscope::gpu
