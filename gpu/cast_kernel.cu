// Batch casts on the GPU: one thread per element, each calling the very round_to_format the
// CPU emulator uses (emu/numbers/round.hpp is __host__ __device__).
#include <cuda_runtime.h>

#include <string>

#include "emu/numbers/round.hpp"
#include "gpu/device.hpp"
#include "gpu/primitives/device_buffer.hpp"
#include "lib/error.hpp"

namespace roundscope::gpu {
namespace {

template <class Bits>
__global__ void cast_f32_kernel(const float* in, std::size_t n, emu::Format to, emu::CastOptions o,
                                std::uint64_t first_index, Bits* out) {
    const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (i < n) out[i] = static_cast<Bits>(emu::cast_from_f32(in[i], to, o, first_index + i));
}

}  // namespace

std::string cuda_compiler() {
    return "nvcc " + std::to_string(__CUDACC_VER_MAJOR__) + "." + std::to_string(__CUDACC_VER_MINOR__) + "." +
           std::to_string(__CUDACC_VER_BUILD__);
}

namespace {
std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }
}  // namespace

std::string cuda_runtime_version() {
    int v = 0;
    return cudaRuntimeGetVersion(&v) == cudaSuccess ? cuda_version(v) : "unknown";
}

std::string cuda_driver_version() {
    int v = 0;
    return cudaDriverGetVersion(&v) == cudaSuccess && v > 0 ? cuda_version(v) : "none";
}

std::string device_name() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return {};
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return {};
    return prop.name;
}

template <class Bits>
void cast_batch(std::span<const float> in, const emu::Format& to, const emu::CastOptions& o, std::span<Bits> out,
                std::uint64_t first_index) {
    if (in.size() != out.size()) throw Error("GPU cast: input and output sizes differ");
    if (in.empty()) return;
    DeviceBuffer<float> d_in(in.size());
    DeviceBuffer<Bits> d_out(out.size());
    check(cudaMemcpy(d_in.get(), in.data(), in.size_bytes(), cudaMemcpyHostToDevice), "copy to device");
    const unsigned threads = 256;
    const unsigned blocks = static_cast<unsigned>((in.size() + threads - 1) / threads);
    cast_f32_kernel<<<blocks, threads>>>(d_in.get(), in.size(), to, o, first_index, d_out.get());
    check(cudaGetLastError(), "kernel launch");
    check(cudaMemcpy(out.data(), d_out.get(), out.size_bytes(), cudaMemcpyDeviceToHost), "copy to host");
}

template void cast_batch(std::span<const float>, const emu::Format&, const emu::CastOptions&, std::span<std::uint8_t>,
                         std::uint64_t);
template void cast_batch(std::span<const float>, const emu::Format&, const emu::CastOptions&, std::span<std::uint16_t>,
                         std::uint64_t);
template void cast_batch(std::span<const float>, const emu::Format&, const emu::CastOptions&, std::span<std::uint32_t>,
                         std::uint64_t);

}  // namespace roundscope::gpu
