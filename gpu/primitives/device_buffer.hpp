#pragma once
// CUDA error checks and device memory that frees itself: what every host function of gpu/ uses.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "lib/error.hpp"

namespace roundscope::gpu {

inline void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) throw Error(std::string("GPU: ") + what + ": " + cudaGetErrorString(status));
}

template <class T>
class DeviceBuffer {
public:
    explicit DeviceBuffer(std::size_t n) : size_(n) { check(cudaMalloc(&data_, n * sizeof(T) + 1), "cudaMalloc"); }
    ~DeviceBuffer() { cudaFree(data_); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), size_(other.size_) { other.data_ = nullptr; }
    DeviceBuffer& operator=(DeviceBuffer&&) = delete;
    T* get() const { return data_; }

    void upload(const T* host) {
        check(cudaMemcpy(data_, host, size_ * sizeof(T), cudaMemcpyHostToDevice), "copy to device");
    }
    void download(T* host) const {
        check(cudaMemcpy(host, data_, size_ * sizeof(T), cudaMemcpyDeviceToHost), "copy to host");
    }
    /// Every byte zero, on the device: no host buffer of the size (dS at a benchmark shape is GBs).
    void zero() { check(cudaMemset(data_, 0, size_ * sizeof(T)), "cudaMemset"); }
    /// Every byte 0xFF (a NaN in each float format): an output the kernel leaves unwritten cannot
    /// pass for an answer, and compute-sanitizer's initcheck, which does not see the TMA unit's
    /// stores (H200, 2026-12-04: every sector of the TMA-stored O flagged, its bits exact), sees
    /// the buffer as written.
    void poison() { check(cudaMemset(data_, 0xFF, size_ * sizeof(T)), "cudaMemset"); }

private:
    T* data_ = nullptr;
    std::size_t size_;
};

}  // namespace roundscope::gpu
