// The satfinite conversions the Hopper kernels cast with, on the GPU: the BF16 pair (P and O of
// the BF16 kernel, O of the FP8 one) and the E4M3 quadruple (the FP8 kernel's P), the
// instructions' bits against the emulator's functions the simulated GPU runs in their place.
#include <cuda_runtime.h>

#include "emu/numbers/round.hpp"
#include "gpu/device.hpp"
#include "gpu/primitives/convert.hpp"
#include "gpu/primitives/device_buffer.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"

namespace roundscope::gpu {
namespace {

// Input i in the pair's low half and i rotated by 16 bits in its high half: every float32 in
// each half once. result[0]: mismatches; result[1]: the smallest mismatching i (2^32 if none).
__global__ void bf16x2_satfinite_kernel(unsigned long long* result) {
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    unsigned long long bad = 0, first = 1ull << 32;
    for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < (1ull << 32);
         i += stride) {
        const auto lo = static_cast<std::uint32_t>(i), hi = lo << 16 | lo >> 16;
        const float a = float_from_bits(lo), b = float_from_bits(hi);
        const std::uint32_t want = emu::bf16_saturating_rne(a) | emu::bf16_saturating_rne(b) << 16;
        if (bf16x2_rn_satfinite(a, b) != want) ++bad, first = first < i ? first : i;
    }
    if (bad != 0) {
        atomicAdd(&result[0], bad);
        atomicMin(&result[1], first);
    }
}

// Input i in bytes 0 and 3, i rotated by 8, 16 bits in bytes 1 and 2: every float32 in each
// byte once. Results as above.
__global__ void e4m3x4_satfinite_kernel(unsigned long long* result) {
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    unsigned long long bad = 0, first = 1ull << 32;
    for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < (1ull << 32);
         i += stride) {
        const auto x0 = static_cast<std::uint32_t>(i), x1 = x0 << 8 | x0 >> 24, x2 = x0 << 16 | x0 >> 16;
        const float a = float_from_bits(x0), b = float_from_bits(x1), c = float_from_bits(x2);
        constexpr emu::Format e4m3 = emu::e4m3;  // a copy: device code cannot refer to the host's object
        const auto e = [&](float x) { return emu::steps::saturating_cast(x, e4m3); };
        const std::uint32_t want = e(a) | e(b) << 8 | e(c) << 16 | e(a) << 24;
        if (e4m3x4_rn_satfinite(a, b, c, a) != want) ++bad, first = first < i ? first : i;
    }
    if (bad != 0) {
        atomicAdd(&result[0], bad);
        atomicMin(&result[1], first);
    }
}

template <class Kernel>
ConvertCheck run_check(Kernel kernel) {
    unsigned long long host[2] = {0, 1ull << 32};
    DeviceBuffer<unsigned long long> result(2);
    check(cudaMemcpy(result.get(), host, sizeof host, cudaMemcpyHostToDevice), "copy to device");
    kernel<<<1024, 256>>>(result.get());
    check(cudaGetLastError(), "kernel launch");
    check(cudaMemcpy(host, result.get(), sizeof host, cudaMemcpyDeviceToHost), "copy to host");
    return {host[0], host[0] != 0 ? static_cast<std::uint32_t>(host[1]) : 0u};
}

}  // namespace

ConvertCheck bf16x2_satfinite_check() { return run_check(bf16x2_satfinite_kernel); }

ConvertCheck e4m3x4_satfinite_check() { return run_check(e4m3x4_satfinite_kernel); }

}  // namespace roundscope::gpu
