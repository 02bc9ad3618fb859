// The satfinite BF16 pair conversion the Hopper kernel casts P and O with, on the GPU: the
// instruction's bits against the emulator's function the simulated GPU runs in its place.
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

}  // namespace

ConvertCheck bf16x2_satfinite_check() {
    unsigned long long host[2] = {0, 1ull << 32};
    DeviceBuffer<unsigned long long> result(2);
    check(cudaMemcpy(result.get(), host, sizeof host, cudaMemcpyHostToDevice), "copy to device");
    bf16x2_satfinite_kernel<<<1024, 256>>>(result.get());
    check(cudaGetLastError(), "kernel launch");
    check(cudaMemcpy(host, result.get(), sizeof host, cudaMemcpyDeviceToHost), "copy to host");
    return {host[0], host[0] != 0 ? static_cast<std::uint32_t>(host[1]) : 0u};
}

}  // namespace roundscope::gpu
