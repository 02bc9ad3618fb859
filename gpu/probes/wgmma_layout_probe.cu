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

// a_at is read only in the device pass (the host pass of nvcc sees it unused).
[[maybe_unused]] constexpr std::uint32_t a_at = 0, b_at = 16384, shared_bytes = b_at + 16384 + 1024;  // + alignment

struct ProbeParams {
    const std::uint32_t *a, *b;
    const float* c;
    float* d;
    int k;
    Swizzle swizzle;
};

template <int N, Major AMajor, Major BMajor, bool ARegisters>
ROUNDSCOPE_KERNEL void layout_probe_kernel(ProbeParams p) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    (void)p;  // built for a GPU without wgmma: the host never launches it there
#else
    std::byte* shared = shared_memory<std::byte>();
    shared += (1024 - shared_address(shared) % 1024) % 1024;
    const std::uint32_t base = shared_address(shared);
    const int t = static_cast<int>(threadIdx.x);
    auto store = [&](std::uint32_t address, std::uint32_t bits) {
        const auto v = static_cast<std::uint16_t>(bits);
        std::memcpy(shared + (address - base), &v, 2);
    };
    for (int i = t; i < 64 * p.k; i += 128) {
        const int r = i / p.k, kk = i % p.k;
        store(operand_address(probe_layout(AMajor, base + a_at, p.k, p.swizzle, kk / 16), AMajor,
                              static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(kk % 16), 2),
              p.a[i]);
    }
    for (int i = t; i < N * p.k; i += 128) {
        const int r = i / p.k, kk = i % p.k;
        store(operand_address(probe_layout(BMajor, base + b_at, p.k, p.swizzle, kk / 16), BMajor,
                              static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(kk % 16), 2),
              p.b[i]);
    }
    fence_async_shared();
    sync_threads();
    const int warp = t / 32, lane = t % 32;
    float acc[N / 2];
    for (int x = 0; x < N / 2; ++x) acc[x] = p.c[wgmma_row(t, x) * N + wgmma_col(t, x)];
    wgmma_fence();
    for (int step = 0; step < p.k / 16; ++step) {
        const std::uint64_t db = encode_descriptor(probe_layout(BMajor, base + b_at, p.k, p.swizzle, step));
        if constexpr (ARegisters) {  // the warp's 16 rows by mma.sync's A loader, from the k16 step's columns
            std::uint32_t ra[4];
            load_a_fragment<Input::bf16>(TileOperands{p.a + 16 * step, nullptr, p.k}, 16 * warp, lane, ra);
            wgmma_bf16_rs<N, BMajor>(acc, ra, db, true);
        } else {
            const std::uint64_t da = encode_descriptor(probe_layout(AMajor, base + a_at, p.k, p.swizzle, step));
            wgmma_bf16_ss<N, AMajor, BMajor>(acc, da, db, true);
        }
    }
    wgmma_commit_group();
    wgmma_wait_group<0>();
    for (int x = 0; x < N / 2; ++x) p.d[wgmma_row(t, x) * N + wgmma_col(t, x)] = acc[x];
#endif
}

template <int N, Major AMajor, Major BMajor, bool ARegisters>
void launch_case(const ProbeParams& p) {
    launch("wgmma layout probe", layout_probe_kernel<N, AMajor, BMajor, ARegisters>, dim3(1), 128, shared_bytes, p);
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

std::string layout_case_name(const WgmmaLayoutCase& c) {
    auto major = [](Major m) { return m == Major::k ? "k" : "mn"; };
    std::string out = "n";  // appended piece by piece: GCC 12 warns falsely on "n" + std::string
    out += std::to_string(c.n);
    out += " k" + std::to_string(c.k);
    out += std::string(" A:") + (c.a_in_registers ? "registers" : major(c.a_major));
    out += std::string(" B:") + major(c.b_major);
    out += " swizzle " + std::to_string(swizzle_span(c.swizzle));
    return out;
}

std::string layout_case_unsupported(const WgmmaLayoutCase& c) {
    if (c.n != 64 && c.n != 128) return "N is 64 or 128";
    if (c.k < 16 || c.k > 64 || c.k % 16 != 0) return "K is 16, 32, 48 or 64";
    const bool k_major_swizzled =
        c.swizzle != Swizzle::none && ((!c.a_in_registers && c.a_major == Major::k) || c.b_major == Major::k);
    if (k_major_swizzled && 2 * c.k > static_cast<int>(swizzle_span(c.swizzle)))
        return "a swizzled K-major operand holds K within its span";
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
    if (c.n == 64)
        launch_width<64>(c, p);
    else
        launch_width<128>(c, p);
    return downloaded(dd, 64 * n);
}

}  // namespace roundscope::gpu
