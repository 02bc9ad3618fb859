// The MUFU probe kernels: one PTX instruction per input, exactly as written (inline asm, so no
// compiler rewrite); the non-ftz variants are expanded by ptxas into the guard sequences the
// SASS shows (a halving and a square below -126 for ex2, a 2^24 scaling for lg2), which is
// what a kernel compiled without fast math runs.
#include <cuda_runtime.h>

#include "emu/batch/conversion_digest.hpp"
#include "gpu/primitives/device_buffer.hpp"
#include "gpu/probes/mma_probe.hpp"
#include "gpu/probes/mufu_probe.hpp"

namespace roundscope::gpu {
namespace {

template <MufuVariant v>
__device__ float evaluate(float x) {
    float y;
    if constexpr (v == MufuVariant::ex2_ftz) asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    if constexpr (v == MufuVariant::ex2) asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    if constexpr (v == MufuVariant::lg2_ftz) asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    if constexpr (v == MufuVariant::lg2) asm("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    if constexpr (v == MufuVariant::rcp_ftz) asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Each thread sums 64 consecutive inputs; a chunk of 2^16 is 1024 threads' atomics.
template <MufuVariant v>
__global__ void digest_kernel(unsigned long long* digests) {
    const std::uint64_t first = (static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 64;
    unsigned long long sum = 0;
    for (std::uint64_t i = first; i < first + 64; ++i) {
        const auto x = static_cast<std::uint32_t>(i);
        sum += emu::conversion_mix(x, __float_as_uint(evaluate<v>(__uint_as_float(x))));
    }
    atomicAdd(&digests[first >> mufu_chunk_bits], sum);
}

template <MufuVariant v>
__global__ void output_kernel(std::uint32_t first, std::uint32_t count, std::uint32_t* out) {
    const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) out[i] = __float_as_uint(evaluate<v>(__uint_as_float(first + i)));
}

template <template <MufuVariant> class Launch, class... Args>
void dispatch(MufuVariant v, Args... args) {
    switch (v) {
        case MufuVariant::ex2_ftz:
            return Launch<MufuVariant::ex2_ftz>::run(args...);
        case MufuVariant::ex2:
            return Launch<MufuVariant::ex2>::run(args...);
        case MufuVariant::lg2_ftz:
            return Launch<MufuVariant::lg2_ftz>::run(args...);
        case MufuVariant::lg2:
            return Launch<MufuVariant::lg2>::run(args...);
        case MufuVariant::rcp_ftz:
            return Launch<MufuVariant::rcp_ftz>::run(args...);
    }
}

template <MufuVariant v>
struct DigestLaunch {
    static void run(unsigned long long* digests) {
        constexpr unsigned threads = 256, blocks = static_cast<unsigned>((std::uint64_t{1} << 32) / 64 / threads);
        digest_kernel<v><<<blocks, threads>>>(digests);
    }
};

template <MufuVariant v>
struct OutputLaunch {
    static void run(std::uint32_t first, std::uint32_t count, std::uint32_t* out) {
        output_kernel<v><<<(count + 255) / 256, 256>>>(first, count, out);
    }
};

void require_gpu() {
    if (compute_capability() == 0) throw Error("MUFU probe: no usable CUDA device");
}

}  // namespace

std::vector<std::uint64_t> mufu_digests(MufuVariant v) {
    require_gpu();
    DeviceBuffer<unsigned long long> digests(mufu_chunks);
    digests.zero();
    dispatch<DigestLaunch>(v, digests.get());
    check(cudaGetLastError(), "MUFU digest launch");
    check(cudaDeviceSynchronize(), "MUFU digests");
    std::vector<unsigned long long> host(mufu_chunks);
    digests.download(host.data());
    return {host.begin(), host.end()};
}

std::vector<std::uint32_t> mufu_outputs(MufuVariant v, std::uint32_t first, std::uint32_t count) {
    require_gpu();
    if (count == 0 || std::uint64_t{first} + count > (std::uint64_t{1} << 32))
        throw Error("MUFU probe: the window leaves the 2^32 inputs");
    DeviceBuffer<std::uint32_t> out(count);
    dispatch<OutputLaunch>(v, first, count, out.get());
    check(cudaGetLastError(), "MUFU output launch");
    check(cudaDeviceSynchronize(), "MUFU outputs");
    std::vector<std::uint32_t> host(count);
    out.download(host.data());
    return host;
}

}  // namespace roundscope::gpu
