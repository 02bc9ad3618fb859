#pragma once
// The runtime the kernels' host code uses: device memory (DeviceBuffer; uploaded, zeroed and
// downloaded buffers) and launch(). Under nvcc, CUDA's (gpu/primitives/runtime_cuda.cuh); with
// ROUNDSCOPE_SIMT_HOST, the simulated GPU's (gpu/host/runtime_host.hpp), so that the same host
// code drives either.
#include <cstddef>
#include <vector>

#if defined(ROUNDSCOPE_SIMT_HOST)
#include "gpu/host/runtime_host.hpp"
#else
#include "gpu/primitives/runtime_cuda.cuh"
#endif

namespace roundscope::gpu {

/// A device buffer holding `x`.
template <class T>
DeviceBuffer<T> uploaded(const std::vector<T>& x) {
    DeviceBuffer<T> b(x.size());
    if (!x.empty()) b.upload(x.data());
    return b;
}

/// A device buffer of n elements, every byte zero.
template <class T>
DeviceBuffer<T> zeroed(std::size_t n) {
    DeviceBuffer<T> b(n);
    b.zero();
    return b;
}

/// The first n elements of a device buffer (all of them: n is its size).
template <class T>
std::vector<T> downloaded(const DeviceBuffer<T>& b, std::size_t n) {
    std::vector<T> x(n);
    if (n > 0) b.download(x.data());
    return x;
}

}  // namespace roundscope::gpu
