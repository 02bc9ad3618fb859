// The wgmma layout probe's kernel and host side (gpu/probes/wgmma_layout_probe.hpp), for the GPU and the
// simulated GPU.
#include <cstring>
#include <string>

#include "gpu/primitives/runtime.hpp"
#include "gpu/primitives/sync.hpp"
#include "gpu/primitives/tile_operands.cuh"
#include "gpu/primitives/tma.hpp"
#include "gpu/primitives/wgmma.hpp"
#include "gpu/probes/mma_probe.hpp"
#include "gpu/probes/wgmma_layout_probe.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"

namespace roundscope::gpu {
namespace {

// a_at is read only in the device pass (the host pass of nvcc sees it unused). A: 64 rows of at most
// 128 bytes along K (a swizzle span) in 8 KiB; B: N rows of it, 28 KiB at N = 224 (E4M3).
[[maybe_unused]] constexpr std::uint32_t a_at = 0, b_at = 16384, shared_bytes = b_at + 32768 + 1024;  // + alignment

struct ProbeParams {
    const std::uint32_t *a, *b;
    const float* c;
    float* d;
    int k;
    Swizzle swizzle;
};

template <int N, Major AMajor, Major BMajor, bool ARegisters, bool E4m3>
ROUNDSCOPE_KERNEL void layout_probe_kernel(ProbeParams p) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    (void)p;  // built for a GPU without wgmma: the host never launches it there
#else
    constexpr std::uint32_t bytes = E4m3 ? 1 : 2;
    constexpr int depth = E4m3 ? 32 : 16;  // K of one wgmma: 32 bytes either way
    std::byte* shared = shared_memory<std::byte>();
    shared += (1024 - shared_address(shared) % 1024) % 1024;
    const std::uint32_t base = shared_address(shared);
    const int t = static_cast<int>(threadIdx.x);
    auto store = [&](std::uint32_t address, std::uint32_t bits) {
        const auto v = static_cast<std::uint16_t>(bits);
        std::memcpy(shared + (address - base), &v, bytes);  // little-endian: an FP8 is the low byte
    };
    for (int i = t; i < 64 * p.k; i += 128) {
        const int r = i / p.k, kk = i % p.k;
        store(operand_address(probe_layout(AMajor, base + a_at, p.k, p.swizzle, kk / depth, bytes), AMajor,
                              static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(kk % depth), bytes),
              p.a[i]);
    }
    for (int i = t; i < N * p.k; i += 128) {
        const int r = i / p.k, kk = i % p.k;
        store(operand_address(probe_layout(BMajor, base + b_at, p.k, p.swizzle, kk / depth, bytes), BMajor,
                              static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(kk % depth), bytes),
              p.b[i]);
    }
    fence_async_shared();
    sync_threads();
    const int warp = t / 32, lane = t % 32;
    float acc[N / 2];
    for (int x = 0; x < N / 2; ++x) acc[x] = p.c[wgmma_row(t, x) * N + wgmma_col(t, x)];
    wgmma_fence();
    for (int step = 0; step < p.k / depth; ++step) {
        const std::uint64_t db = encode_descriptor(probe_layout(BMajor, base + b_at, p.k, p.swizzle, step, bytes));
        if constexpr (ARegisters) {  // the warp's 16 rows by mma.sync's A loader, from the step's columns
            std::uint32_t ra[4];
            load_a_fragment<E4m3 ? Input::e4m3 : Input::bf16>(TileOperands{p.a + depth * step, nullptr, p.k}, 16 * warp,
                                                              lane, ra);
            if constexpr (E4m3)
                wgmma_e4m3_rs<N>(acc, ra, db, true);
            else
                wgmma_bf16_rs<N, BMajor>(acc, ra, db, true);
        } else {
            const std::uint64_t da = encode_descriptor(probe_layout(AMajor, base + a_at, p.k, p.swizzle, step, bytes));
            if constexpr (E4m3)
                wgmma_e4m3_ss<N>(acc, da, db, true);
            else
                wgmma_bf16_ss<N, AMajor, BMajor>(acc, da, db, true);
        }
    }
    wgmma_commit_group();
    wgmma_wait_group<0>();
    for (int x = 0; x < N / 2; ++x) p.d[wgmma_row(t, x) * N + wgmma_col(t, x)] = acc[x];
#endif
}

template <int N, Major AMajor, Major BMajor, bool ARegisters, bool E4m3 = false>
void launch_case(const ProbeParams& p) {
    launch("wgmma layout probe", layout_probe_kernel<N, AMajor, BMajor, ARegisters, E4m3>, dim3(1), 128, shared_bytes,
           p);
}

template <int N>
void launch_width(const WgmmaLayoutCase& c, const ProbeParams& p) {
    constexpr Major k = Major::k, mn = Major::mn;
    if (c.a_in_registers)
        c.b_major == k ? launch_case<N, k, k, true>(p) : launch_case<N, k, mn, true>(p);
    else if (c.a_major == k)
        c.b_major == k ? launch_case<N, k, k, false>(p) : launch_case<N, k, mn, false>(p);
    else
        c.b_major == k ? launch_case<N, mn, k, false>(p) : launch_case<N, mn, mn, false>(p);
}

// E4M3: both operands K-major
template <int N>
void launch_e4m3_width(const WgmmaLayoutCase& c, const ProbeParams& p) {
    constexpr Major k = Major::k;
    c.a_in_registers ? launch_case<N, k, k, true, true>(p) : launch_case<N, k, k, false, true>(p);
}

}  // namespace

std::vector<WgmmaLayoutCase> wgmma_layout_cases() {
    std::vector<WgmmaLayoutCase> out;
    for (const int n : {64, 128})
        for (const int k : {16, 64})
            for (const Swizzle s : {Swizzle::none, Swizzle::b32, Swizzle::b64, Swizzle::b128})
                for (const int form : {0, 1, 2, 3, 4, 5}) {  // A k / mn / registers, x B k / mn
                    const WgmmaLayoutCase c{
                        n, k, form % 3 == 1 ? Major::mn : Major::k, form < 3 ? Major::k : Major::mn, form % 3 == 2, s};
                    if (layout_case_unsupported(c).empty()) out.push_back(c);
                }
    return out;
}

std::vector<WgmmaLayoutCase> wgmma_e4m3_layout_cases() {
    std::vector<WgmmaLayoutCase> out;
    for (const int n : {64, 128, 160, 224})
        for (const int k : {32, 64, 128})
            for (const Swizzle s : {Swizzle::none, Swizzle::b32, Swizzle::b64, Swizzle::b128})
                for (const bool registers : {false, true}) {
                    const WgmmaLayoutCase c{n, k, Major::k, Major::k, registers, s, true};
                    if (layout_case_unsupported(c).empty()) out.push_back(c);
                }
    return out;
}

std::string layout_case_name(const WgmmaLayoutCase& c) {
    auto major = [](Major m) { return m == Major::k ? "k" : "mn"; };
    std::string out = "n";  // appended piece by piece: GCC 12 warns falsely on "n" + std::string
    out += std::to_string(c.n);
    out += " k" + std::to_string(c.k);
    out += std::string(" A:") + (c.a_in_registers ? "registers" : major(c.a_major));
    out += std::string(" B:") + major(c.b_major);
    out += " swizzle " + std::to_string(swizzle_span(c.swizzle));
    if (c.e4m3) out += " e4m3";
    return out;
}

std::string layout_case_unsupported(const WgmmaLayoutCase& c) {
    if (c.e4m3) {
        if (c.n != 64 && c.n != 128 && c.n != 160 && c.n != 224) return "N is 64, 128, 160 or 224 (E4M3)";
        if (c.k != 32 && c.k != 64 && c.k != 128) return "K is 32, 64 or 128 (E4M3)";
        if (c.a_major != Major::k || c.b_major != Major::k) return "E4M3 operands are K-major";
    } else {
        if (c.n != 64 && c.n != 128) return "N is 64 or 128";
        if (c.k < 16 || c.k > 64 || c.k % 16 != 0) return "K is 16, 32, 48 or 64";
    }
    const bool k_major_swizzled =
        c.swizzle != Swizzle::none && ((!c.a_in_registers && c.a_major == Major::k) || c.b_major == Major::k);
    if (k_major_swizzled && static_cast<int>(c.element_bytes()) * c.k > static_cast<int>(swizzle_span(c.swizzle)))
        return "a swizzled K-major operand holds K within its span";
    // the bytes an operand of `rows` rows takes: a span a row when swizzled K-major, else its elements
    auto bytes = [&](int rows, Major m) {
        return m == Major::k && c.swizzle != Swizzle::none ? rows * static_cast<int>(swizzle_span(c.swizzle))
                                                           : rows * c.k * static_cast<int>(c.element_bytes());
    };
    if (bytes(64, c.a_major) > static_cast<int>(b_at - a_at) ||
        bytes(c.n, c.b_major) > static_cast<int>(shared_bytes - 1024 - b_at))
        return "the probe's shared memory holds A in 16 KiB and B in 32 KiB";
    return {};
}

std::vector<float> run_wgmma_layout_probe(const WgmmaLayoutCase& c, const std::vector<std::uint32_t>& a,
                                          const std::vector<std::uint32_t>& b, const std::vector<float>& c_in) {
    if (const std::string why = layout_case_unsupported(c); !why.empty())
        throw Error("wgmma layout probe " + layout_case_name(c) + ": " + why);
    const auto n = static_cast<std::size_t>(c.n), k = static_cast<std::size_t>(c.k);
    if (a.size() != 64 * k || b.size() != n * k || c_in.size() != 64 * n)
        throw Error("wgmma layout probe: A must be 64 x K, B N x K and C 64 x N");
    if (compute_capability() < 90) throw Error("wgmma layout probe: wgmma needs an sm_90 GPU");
    DeviceBuffer<std::uint32_t> da = uploaded(a), db = uploaded(b);
    DeviceBuffer<float> dc = uploaded(c_in), dd(64 * n);
    const ProbeParams p{da.get(), db.get(), dc.get(), dd.get(), c.k, c.swizzle};
    if (c.e4m3) {
        if (c.n == 64)
            launch_e4m3_width<64>(c, p);
        else if (c.n == 128)
            launch_e4m3_width<128>(c, p);
        else if (c.n == 160)
            launch_e4m3_width<160>(c, p);
        else
            launch_e4m3_width<224>(c, p);
    } else if (c.n == 64)
        launch_width<64>(c, p);
    else
        launch_width<128>(c, p);
    return downloaded(dd, 64 * n);
}

}  // namespace roundscope::gpu
