// The tensor-core variants beyond the basic probe (gpu/probes/mma_probe.cu): tf32 inputs (mma.sync
// m16n8k8, wgmma m64n8k8), float16 accumulators (mma.sync m16n8k16 f16; wgmma m64n8k16 f16 and
// m64n8k32 FP8), and wgmma with scale-d = 0. Operands go into exactly the registers or
// shared-memory layout the PTX ISA specifies ("Matrix fragments for mma.m16n8k8" with .tf32,
// "... for mma.m16n8k16" with .f16 accumulators, "Register fragments and shared memory matrix
// layouts" for wgmma); D is stored back row-major. Each tile is one instruction.
#include <cuda_runtime.h>

#include <string>

#include "gpu/primitives/device_buffer.hpp"
#include "gpu/primitives/mma_sync.cuh"
#include "gpu/primitives/runtime_cuda.cuh"
#include "gpu/primitives/tile_operands.cuh"
#include "gpu/primitives/wgmma_layout.cuh"
#include "gpu/probes/mma_probe.hpp"

namespace roundscope::gpu {
namespace {

enum class Kind : int {
    mma_tf32,          // mma.sync m16n8k8 .f32.tf32.tf32.f32
    mma_f16_acc,       // mma.sync m16n8k16 .f16.f16.f16.f16
    wgmma_rs_tf32,     // wgmma m64n8k8 .f32.tf32.tf32, A from registers
    wgmma_ss_tf32,     // the same, A from shared memory
    wgmma_rs_f16_acc,  // wgmma m64n8k16 .f16.f16.f16, A from registers
    wgmma_ss_f16_acc,
    wgmma_ss_e4m3_acc16,  // wgmma m64n8k32 .f16.e4m3.e4m3
    wgmma_ss_e5m2_acc16,
    wgmma_ss_bf16_scale0,  // wgmma m64n8k16 .f32.bf16.bf16 with scale-d = 0
    wgmma_ss_e4m3_scale0,  // wgmma m64n8k32 .f32.e4m3.e4m3 with scale-d = 0
};

constexpr bool is_tf32(Kind k) { return k == Kind::mma_tf32 || k == Kind::wgmma_rs_tf32 || k == Kind::wgmma_ss_tf32; }
constexpr bool is_f16_acc(Kind k) {
    return k == Kind::mma_f16_acc || k == Kind::wgmma_rs_f16_acc || k == Kind::wgmma_ss_f16_acc ||
           k == Kind::wgmma_ss_e4m3_acc16 || k == Kind::wgmma_ss_e5m2_acc16;
}
constexpr bool is_fp8_kind(Kind k) {
    return k == Kind::wgmma_ss_e4m3_acc16 || k == Kind::wgmma_ss_e5m2_acc16 || k == Kind::wgmma_ss_e4m3_scale0;
}
constexpr int depth(Kind k) { return is_tf32(k) ? 8 : is_fp8_kind(k) ? 32 : 16; }
constexpr int element_bytes(Kind k) { return is_tf32(k) ? 4 : is_fp8_kind(k) ? 1 : 2; }

// tf32 fragments (m16n8k8): A a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
// B b0 (t, g), b1 (t + 4, g). g = lane / 4, t = lane % 4.
__device__ void load_tf32_a(const TileOperands& op, int row0, int lane, std::uint32_t (&ra)[4]) {
    const int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; ++i) ra[i] = op.A(row0 + g + (i & 1) * 8, t + (i >> 1) * 4);
}

// float16 C/D (m16n8k16 and wgmma's per-warp slice): c0 holds row g, columns 2t and 2t + 1
// (low half first), c1 row g + 8.
__device__ void load_c_f16(const std::uint32_t* c, std::size_t base, int row0, int lane, std::uint32_t (&acc)[2]) {
    const int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 2; ++i) {
        const std::size_t at = base + static_cast<std::size_t>(row0 + g + i * 8) * 8 + 2 * t;
        acc[i] = pack2(c[at], c[at + 1]);
    }
}
__device__ void store_d_f16(std::uint32_t* d, std::size_t base, int row0, int lane, const std::uint32_t (&acc)[2]) {
    const int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 2; ++i) {
        const std::size_t at = base + static_cast<std::size_t>(row0 + g + i * 8) * 8 + 2 * t;
        d[at] = acc[i] & 0xFFFF;
        d[at + 1] = acc[i] >> 16;
    }
}

// One warp per 16 x 8 tile.
template <Kind kind>
__global__ void mma_kernel(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c, std::uint32_t* d) {
    constexpr int k = depth(kind);
    const int tile = blockIdx.x, lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    const TileOperands op{a + static_cast<std::size_t>(tile) * 16 * k, b + static_cast<std::size_t>(tile) * k * 8, k};
    const std::size_t base = static_cast<std::size_t>(tile) * 16 * 8;
    std::uint32_t ra[4], rb[2];
    if constexpr (kind == Kind::mma_tf32) {
        load_tf32_a(op, 0, lane, ra);
        rb[0] = op.B(t, g), rb[1] = op.B(t + 4, g);
        std::uint32_t acc[4];
        for (int i = 0; i < 4; ++i) acc[i] = c[base + fragment_row(lane, i) * 8 + fragment_col(lane, i)];
        asm volatile(
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
        for (int i = 0; i < 4; ++i) d[base + fragment_row(lane, i) * 8 + fragment_col(lane, i)] = acc[i];
    } else {
        load_a_fragment<Input::f16>(op, 0, lane, ra);
        load_b_fragment<Input::f16>(op, lane, rb);
        std::uint32_t acc[2];
        load_c_f16(c, base, 0, lane, acc);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
                     : "+r"(acc[0]), "+r"(acc[1])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
        store_d_f16(d, base, 0, lane, acc);
    }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ROUNDSCOPE_WGMMA_BEGIN(SCALE_D) "{ .reg .pred p; setp.ne.b32 p, " SCALE_D ", 0;\nwgmma.mma_async.sync.aligned."
#endif

template <Kind kind>
__device__ void wgmma_f32(std::uint32_t (&d)[4], const std::uint32_t (&ra)[4], std::uint64_t da, std::uint64_t db) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#define ROUNDSCOPE_D4 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
    if constexpr (kind == Kind::wgmma_rs_tf32) {
        asm volatile(ROUNDSCOPE_WGMMA_BEGIN(
                         "1") "m64n8k8.f32.tf32.tf32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1; }" ROUNDSCOPE_D4
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db)
                     : "memory");
    } else if constexpr (kind == Kind::wgmma_ss_tf32) {
        asm volatile(ROUNDSCOPE_WGMMA_BEGIN("1") "m64n8k8.f32.tf32.tf32 {%0,%1,%2,%3}, %4, %5, p, 1, 1; }" ROUNDSCOPE_D4
                     : "l"(da), "l"(db)
                     : "memory");
    } else if constexpr (kind == Kind::wgmma_ss_bf16_scale0) {
        asm volatile(
            ROUNDSCOPE_WGMMA_BEGIN("0") "m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0; }" ROUNDSCOPE_D4
            : "l"(da), "l"(db)
            : "memory");
    } else if constexpr (kind == Kind::wgmma_ss_e4m3_scale0) {
        asm volatile(
            ROUNDSCOPE_WGMMA_BEGIN("0") "m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, %4, %5, p, 1, 1; }" ROUNDSCOPE_D4
            : "l"(da), "l"(db)
            : "memory");
    }
#undef ROUNDSCOPE_D4
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#else
    (void)d, (void)ra, (void)da, (void)db;
    __trap();
#endif
}

template <Kind kind>
__device__ void wgmma_f16(std::uint32_t (&d)[2], const std::uint32_t (&ra)[4], std::uint64_t da, std::uint64_t db) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#define ROUNDSCOPE_D2 : "+r"(d[0]), "+r"(d[1])
    if constexpr (kind == Kind::wgmma_rs_f16_acc) {
        asm volatile(
            ROUNDSCOPE_WGMMA_BEGIN("1") "m64n8k16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, %6, p, 1, 1, 0; }" ROUNDSCOPE_D2
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db)
            : "memory");
    } else if constexpr (kind == Kind::wgmma_ss_f16_acc) {
        asm volatile(ROUNDSCOPE_WGMMA_BEGIN("1") "m64n8k16.f16.f16.f16 {%0,%1}, %2, %3, p, 1, 1, 0, 0; }" ROUNDSCOPE_D2
                     : "l"(da), "l"(db)
                     : "memory");
    } else if constexpr (kind == Kind::wgmma_ss_e4m3_acc16) {
        asm volatile(ROUNDSCOPE_WGMMA_BEGIN("1") "m64n8k32.f16.e4m3.e4m3 {%0,%1}, %2, %3, p, 1, 1; }" ROUNDSCOPE_D2
                     : "l"(da), "l"(db)
                     : "memory");
    } else if constexpr (kind == Kind::wgmma_ss_e5m2_acc16) {
        asm volatile(ROUNDSCOPE_WGMMA_BEGIN("1") "m64n8k32.f16.e5m2.e5m2 {%0,%1}, %2, %3, p, 1, 1; }" ROUNDSCOPE_D2
                     : "l"(da), "l"(db)
                     : "memory");
    }
#undef ROUNDSCOPE_D2
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#else
    (void)d, (void)ra, (void)da, (void)db;
    __trap();
#endif
}

// One warpgroup (128 threads) per 64 x 8 tile; warp w owns rows [16 w, 16 w + 16).
template <Kind kind>
__global__ void wgmma_kernel(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c, std::uint32_t* d) {
    constexpr int k = depth(kind), bytes = element_bytes(kind);
    __shared__ alignas(128) unsigned char smem_a[64 * 32];
    __shared__ alignas(128) unsigned char smem_b[8 * 32];
    const int tile = blockIdx.x, thread = threadIdx.x, warp = thread / 32, lane = thread % 32;
    const TileOperands op{a + static_cast<std::size_t>(tile) * 64 * k, b + static_cast<std::size_t>(tile) * k * 8, k};
    store_wgmma_operands(op, k, bytes, smem_a, smem_b);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
    __syncthreads();
    std::uint32_t ra[4] = {0, 0, 0, 0};
    if constexpr (kind == Kind::wgmma_rs_tf32) load_tf32_a(op, warp * 16, lane, ra);
    if constexpr (kind == Kind::wgmma_rs_f16_acc) load_a_fragment<Input::f16>(op, warp * 16, lane, ra);
    const std::uint64_t da = matrix_descriptor(smem_a, k, bytes), db = matrix_descriptor(smem_b, k, bytes);
    const std::size_t base = static_cast<std::size_t>(tile) * 64 * 8;
    if constexpr (is_f16_acc(kind)) {
        std::uint32_t acc[2];
        load_c_f16(c, base, warp * 16, lane, acc);
        wgmma_f16<kind>(acc, ra, da, db);
        store_d_f16(d, base, warp * 16, lane, acc);
    } else {
        std::uint32_t acc[4];
        for (int i = 0; i < 4; ++i) acc[i] = c[base + (warp * 16 + fragment_row(lane, i)) * 8 + fragment_col(lane, i)];
        wgmma_f32<kind>(acc, ra, da, db);
        for (int i = 0; i < 4; ++i) d[base + (warp * 16 + fragment_row(lane, i)) * 8 + fragment_col(lane, i)] = acc[i];
    }
}

template <Kind kind>
void launch_kind(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c, std::uint32_t* d, int tiles) {
    if constexpr (kind == Kind::mma_tf32 || kind == Kind::mma_f16_acc) {
        mma_kernel<kind><<<tiles, 32>>>(a, b, c, d);
    } else {
        wgmma_kernel<kind><<<tiles, 128>>>(a, b, c, d);
    }
}

using Launch = void (*)(const std::uint32_t*, const std::uint32_t*, const std::uint32_t*, std::uint32_t*, int);

struct KindInfo {
    Kind kind;
    const char* name;
    ProbeInstruction instruction;
    const emu::Format* input;
    const emu::Format* accumulator;
    bool scale_d_zero;
    const char* ptx;
    Launch launch;
};

const KindInfo kinds[] = {
    {Kind::mma_tf32, "mma_tf32", ProbeInstruction::mma_sync, &emu::f32, &emu::f32, false,
     "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", &launch_kind<Kind::mma_tf32>},
    {Kind::mma_f16_acc, "mma_fp16_acc_f16", ProbeInstruction::mma_sync, &emu::f16, &emu::f16, false,
     "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", &launch_kind<Kind::mma_f16_acc>},
    {Kind::wgmma_rs_tf32, "wgmma_rs_tf32", ProbeInstruction::wgmma_rs, &emu::f32, &emu::f32, false,
     "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 (A from registers)", &launch_kind<Kind::wgmma_rs_tf32>},
    {Kind::wgmma_ss_tf32, "wgmma_ss_tf32", ProbeInstruction::wgmma_ss, &emu::f32, &emu::f32, false,
     "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 (A from shared memory)", &launch_kind<Kind::wgmma_ss_tf32>},
    {Kind::wgmma_rs_f16_acc, "wgmma_rs_fp16_acc_f16", ProbeInstruction::wgmma_rs, &emu::f16, &emu::f16, false,
     "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16 (A from registers)", &launch_kind<Kind::wgmma_rs_f16_acc>},
    {Kind::wgmma_ss_f16_acc, "wgmma_ss_fp16_acc_f16", ProbeInstruction::wgmma_ss, &emu::f16, &emu::f16, false,
     "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16 (A from shared memory)", &launch_kind<Kind::wgmma_ss_f16_acc>},
    {Kind::wgmma_ss_e4m3_acc16, "wgmma_ss_e4m3_acc_f16", ProbeInstruction::wgmma_ss, &emu::e4m3, &emu::f16, false,
     "wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e4m3 (A from shared memory)",
     &launch_kind<Kind::wgmma_ss_e4m3_acc16>},
    {Kind::wgmma_ss_e5m2_acc16, "wgmma_ss_e5m2_acc_f16", ProbeInstruction::wgmma_ss, &emu::e5m2, &emu::f16, false,
     "wgmma.mma_async.sync.aligned.m64n8k32.f16.e5m2.e5m2 (A from shared memory)",
     &launch_kind<Kind::wgmma_ss_e5m2_acc16>},
    {Kind::wgmma_ss_bf16_scale0, "wgmma_ss_bf16_scale_d0", ProbeInstruction::wgmma_ss, &emu::bf16, &emu::f32, true,
     "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 (A from shared memory, scale-d = 0)",
     &launch_kind<Kind::wgmma_ss_bf16_scale0>},
    {Kind::wgmma_ss_e4m3_scale0, "wgmma_ss_e4m3_scale_d0", ProbeInstruction::wgmma_ss, &emu::e4m3, &emu::f32, true,
     "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 (A from shared memory, scale-d = 0)",
     &launch_kind<Kind::wgmma_ss_e4m3_scale0>},
};

const KindInfo& info(const ProbeVariant& v) {
    for (const KindInfo& k : kinds)
        if (v.name == k.name) return k;
    throw Error("GPU probe: unknown variant '" + v.name + "'");
}

}  // namespace

std::vector<ProbeVariant> extra_probe_variants(int cc) {
    std::vector<ProbeVariant> out;
    for (const KindInfo& k : kinds) {
        const bool wgmma = k.instruction != ProbeInstruction::mma_sync;
        if ((wgmma && cc != 90) || cc < 80) continue;
        out.push_back({k.name, k.instruction, k.input, k.accumulator, k.scale_d_zero});
    }
    return out;
}

std::string probe_ptx(const ProbeVariant& v) { return info(v).ptx; }
int probe_depth(const ProbeVariant& v) { return depth(info(v).kind); }

std::vector<std::uint32_t> run_mma_probe(const ProbeVariant& v, const std::vector<std::uint32_t>& a,
                                         const std::vector<std::uint32_t>& b, const std::vector<std::uint32_t>& c,
                                         std::int64_t tiles) {
    const KindInfo& k = info(v);
    const int rows = probe_rows(k.instruction), kk = depth(k.kind);
    if (a.size() != static_cast<std::size_t>(tiles * rows * kk) ||
        b.size() != static_cast<std::size_t>(tiles * kk * 8) || c.size() != static_cast<std::size_t>(tiles * rows * 8))
        throw Error("GPU probe: operand sizes do not match the tile count");
    DeviceBuffer<std::uint32_t> da(a.size()), db(b.size()), dc(c.size()), dd(c.size());
    da.upload(a.data());
    db.upload(b.data());
    dc.upload(c.data());
    k.launch(da.get(), db.get(), dc.get(), dd.get(), static_cast<int>(tiles));
    check(cudaGetLastError(), "MMA probe launch");
    check(cudaDeviceSynchronize(), "MMA probe");
    std::vector<std::uint32_t> d(c.size());
    dd.download(d.data());
    return d;
}

}  // namespace roundscope::gpu
