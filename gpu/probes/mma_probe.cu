// MMA probe kernels: each tile's operands are loaded from global memory into exactly the
// registers (mma.sync, wgmma with A in registers) or shared-memory layout (wgmma descriptors)
// that the PTX ISA specifies, one instruction is issued, and D is stored back row-major.
// Fragment layouts: PTX ISA 8.x, "Matrix fragments for mma.m16n8k16" and "mma.m16n8k32";
// wgmma: "Register fragments and shared memory matrix layouts" (canonical K-major layout
// without swizzling: 8 x 16-byte core matrices).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <string>

#include "emu/batch/conversion_digest.hpp"
#include "gpu/primitives/device_buffer.hpp"
#include "gpu/primitives/mma_sync.cuh"
#include "gpu/primitives/wgmma_layout.cuh"
#include "gpu/probes/mma_probe.hpp"
#include "gpu/probes/mma_sync_probe.cuh"

namespace roundscope::gpu {
namespace {

// nvcc cannot compile fmt's headers in C++20 mode: messages are built from strings here.
std::string str(std::string_view s) { return std::string(s); }

// ---- wgmma (sm_90a) ---------------------------------------------------------------------

template <Input in, bool a_in_registers>
__device__ void wgmma(std::uint32_t (&d)[4], const std::uint32_t (&a)[4], std::uint64_t desc_a, std::uint64_t desc_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    if constexpr (a_in_registers) {
#define ROUNDSCOPE_WGMMA_RS(TYPE, SHAPE, TAIL)                                                                        \
    asm volatile(                                                                                                     \
        "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"                                                                      \
        "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1" TAIL \
        "; }"                                                                                                         \
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                                                              \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b)                                                     \
        : "memory")
        if constexpr (in == Input::bf16) ROUNDSCOPE_WGMMA_RS("bf16", "m64n8k16", ", 0");
        if constexpr (in == Input::f16) ROUNDSCOPE_WGMMA_RS("f16", "m64n8k16", ", 0");
        if constexpr (in == Input::e4m3) ROUNDSCOPE_WGMMA_RS("e4m3", "m64n8k32", "");
        if constexpr (in == Input::e5m2) ROUNDSCOPE_WGMMA_RS("e5m2", "m64n8k32", "");
#undef ROUNDSCOPE_WGMMA_RS
    } else {
#define ROUNDSCOPE_WGMMA_SS(TYPE, SHAPE, TAIL)                                                                   \
    asm volatile(                                                                                                \
        "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"                                                                 \
        "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " {%0,%1,%2,%3}, %4, %5, p, 1, 1" TAIL "; }" \
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                                                         \
        : "l"(desc_a), "l"(desc_b)                                                                               \
        : "memory")
        if constexpr (in == Input::bf16) ROUNDSCOPE_WGMMA_SS("bf16", "m64n8k16", ", 0, 0");
        if constexpr (in == Input::f16) ROUNDSCOPE_WGMMA_SS("f16", "m64n8k16", ", 0, 0");
        if constexpr (in == Input::e4m3) ROUNDSCOPE_WGMMA_SS("e4m3", "m64n8k32", "");
        if constexpr (in == Input::e5m2) ROUNDSCOPE_WGMMA_SS("e5m2", "m64n8k32", "");
#undef ROUNDSCOPE_WGMMA_SS
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#else
    (void)d, (void)a, (void)desc_a, (void)desc_b;
    __trap();
#endif
}

// One warpgroup (128 threads) per 64 x 8 tile; warp w owns rows [16 w, 16 w + 16).
template <Input in, bool a_in_registers>
__global__ void wgmma_kernel(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c, std::uint32_t* d,
                             int k) {
    constexpr int element_bytes = is_fp8(in) ? 1 : 2;
    __shared__ alignas(128) unsigned char smem_a[64 * 32];
    __shared__ alignas(128) unsigned char smem_b[8 * 32];
    const int tile = blockIdx.x, thread = threadIdx.x, warp = thread / 32, lane = thread % 32;
    const TileOperands op{a + static_cast<std::size_t>(tile) * 64 * k, b + static_cast<std::size_t>(tile) * k * 8, k};
    store_wgmma_operands(op, k, element_bytes, smem_a, smem_b);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // make the stores visible to wgmma
#endif
    __syncthreads();

    std::uint32_t ra[4] = {0, 0, 0, 0}, acc[4];
    if (a_in_registers) load_a_fragment<in>(op, warp * 16, lane, ra);
    const std::size_t base = static_cast<std::size_t>(tile) * 64 * 8;
    for (int i = 0; i < 4; ++i) acc[i] = c[base + (warp * 16 + fragment_row(lane, i)) * 8 + fragment_col(lane, i)];
    wgmma<in, a_in_registers>(acc, ra, matrix_descriptor(smem_a, k, element_bytes),
                              matrix_descriptor(smem_b, k, element_bytes));
    for (int i = 0; i < 4; ++i) d[base + (warp * 16 + fragment_row(lane, i)) * 8 + fragment_col(lane, i)] = acc[i];
}

template <Input in>
void launch_probe(ProbeInstruction instruction, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                  std::uint32_t* d, int tiles, int k) {
    switch (instruction) {
        case ProbeInstruction::mma_sync:  // run_mma_sync_tiles
            break;
        case ProbeInstruction::wgmma_rs:
            wgmma_kernel<in, true><<<tiles, 128>>>(a, b, c, d, k);
            break;
        case ProbeInstruction::wgmma_ss:
            wgmma_kernel<in, false><<<tiles, 128>>>(a, b, c, d, k);
            break;
    }
}

// ---- conversions ------------------------------------------------------------------------

template <Input to>
__device__ std::uint32_t convert(float x) {
    if constexpr (to == Input::bf16) {
        return __bfloat16_as_ushort(__float2bfloat16_rn(x));
    } else if constexpr (to == Input::f16) {
        return __half_as_ushort(__float2half_rn(x));
    } else {
        return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, to == Input::e4m3 ? __NV_E4M3 : __NV_E5M2);
    }
}

template <Input to>
__global__ void conversion_digest_kernel(unsigned long long* digests) {
    const std::uint64_t first = (static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 64;
    unsigned long long sum = 0;
    for (std::uint64_t i = first; i < first + 64; ++i) {
        const auto x = static_cast<std::uint32_t>(i);
        sum += emu::conversion_mix(x, convert<to>(__uint_as_float(x)));
    }
    atomicAdd(&digests[first >> 24], sum);
}

}  // namespace

std::string probe_ptx(ProbeInstruction instruction, const emu::Format& input) {
    const bool fp8 = is_fp8(input_of(input));
    const std::string type = str(input.name);
    if (instruction == ProbeInstruction::mma_sync) {
        return str(fp8 ? "mma.sync.aligned.m16n8k32" : "mma.sync.aligned.m16n8k16") + ".row.col.f32." + type + "." +
               type + ".f32";
    }
    return str(fp8 ? "wgmma.mma_async.sync.aligned.m64n8k32" : "wgmma.mma_async.sync.aligned.m64n8k16") + ".f32." +
           type + "." + type +
           (instruction == ProbeInstruction::wgmma_rs ? " (A from registers)" : " (A from shared memory)");
}

int probe_rows(ProbeInstruction instruction) { return instruction == ProbeInstruction::mma_sync ? 16 : 64; }
int probe_depth(const emu::Format& input) { return mma_depth(input_of(input)); }

std::vector<std::uint32_t> run_mma_probe(ProbeInstruction instruction, const emu::Format& input,
                                         const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b,
                                         const std::vector<std::uint32_t>& c, std::int64_t tiles) {
    const Input in = input_of(input);
    const int cc = compute_capability(), k = probe_depth(input), rows = probe_rows(instruction);
    if (cc == 0) throw Error("GPU probe: no usable CUDA device");
    if (is_fp8(in) && cc < 89)
        throw Error("GPU probe: FP8 MMA needs sm_89 or newer (this GPU is sm_" + std::to_string(cc) + ")");
    if (instruction != ProbeInstruction::mma_sync && cc != 90) {
        throw Error("GPU probe: wgmma needs sm_90 (this GPU is sm_" + std::to_string(cc) + ")");
    }
    if (a.size() != static_cast<std::size_t>(tiles * rows * k) || b.size() != static_cast<std::size_t>(tiles * k * 8) ||
        c.size() != static_cast<std::size_t>(tiles * rows * 8)) {
        throw Error("GPU probe: operand sizes do not match the tile count");
    }
    if (instruction == ProbeInstruction::mma_sync) return run_mma_sync_tiles(in, a, b, c, tiles);
    DeviceBuffer<std::uint32_t> da(a.size()), db(b.size()), dc(c.size()), dd(c.size());
    da.upload(a.data());
    db.upload(b.data());
    dc.upload(c.data());
    const auto t = static_cast<int>(tiles);
    switch (in) {
        case Input::bf16:
            launch_probe<Input::bf16>(instruction, da.get(), db.get(), dc.get(), dd.get(), t, k);
            break;
        case Input::f16:
            launch_probe<Input::f16>(instruction, da.get(), db.get(), dc.get(), dd.get(), t, k);
            break;
        case Input::e4m3:
            launch_probe<Input::e4m3>(instruction, da.get(), db.get(), dc.get(), dd.get(), t, k);
            break;
        case Input::e5m2:
            launch_probe<Input::e5m2>(instruction, da.get(), db.get(), dc.get(), dd.get(), t, k);
            break;
    }
    check(cudaGetLastError(), "MMA probe launch");
    check(cudaDeviceSynchronize(), "MMA probe");
    std::vector<std::uint32_t> d(c.size());
    dd.download(d.data());
    return d;
}

std::vector<std::uint64_t> conversion_digests(const emu::Format& to) {
    const Input in = input_of(to);
    if (is_fp8(in) && compute_capability() < 89) throw Error("GPU probe: FP8 conversions need sm_89 or newer");
    DeviceBuffer<unsigned long long> digests(emu::conversion_digest_chunks);
    check(cudaMemset(digests.get(), 0, emu::conversion_digest_chunks * sizeof(unsigned long long)), "cudaMemset");
    const unsigned threads = 256, blocks = static_cast<unsigned>((std::uint64_t{1} << 32) / 64 / threads);
    switch (in) {
        case Input::bf16:
            conversion_digest_kernel<Input::bf16><<<blocks, threads>>>(digests.get());
            break;
        case Input::f16:
            conversion_digest_kernel<Input::f16><<<blocks, threads>>>(digests.get());
            break;
        case Input::e4m3:
            conversion_digest_kernel<Input::e4m3><<<blocks, threads>>>(digests.get());
            break;
        case Input::e5m2:
            conversion_digest_kernel<Input::e5m2><<<blocks, threads>>>(digests.get());
            break;
    }
    check(cudaGetLastError(), "conversion digest launch");
    check(cudaDeviceSynchronize(), "conversion digest");
    std::vector<unsigned long long> host(emu::conversion_digest_chunks);
    digests.download(host.data());
    return {host.begin(), host.end()};
}

}  // namespace roundscope::gpu
