// The FP8 Hopper forward kernel's host side: what it runs, its buffers (V^T made here, each 32
// keys permuted as gpu/kernels/hopper/fp8/config.cuh says) and TMA maps, its launch.
#include <string>

#include "emu/attention/flash/flash_context.hpp"
#include "emu/attention/recipe/kernel_capabilities.hpp"
#include "gpu/kernels/hopper_fp8_flash.hpp"
#include "gpu/kernels/hopper_fp8_flash_kernel.cuh"
#include "gpu/kernels/problem_support.hpp"
#include "gpu/primitives/runtime.hpp"
#include "gpu/primitives/tensor_map.hpp"
#include "lib/error.hpp"

namespace roundscope::gpu {
namespace {

namespace fp8 = hopper::fp8;

static_assert(hopper::block_m == 128 && fp8::block_n<64> == 160 && fp8::block_n<128> == 224,
              "the FP8 kernel's row of emu/attention/recipe/kernel_capabilities.cpp says block_n=fa3-fp8");

std::vector<std::uint8_t> bytes_of(const std::vector<std::uint32_t>& x) {
    std::vector<std::uint8_t> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<std::uint8_t>(x[i]);
    return y;
}

std::uint64_t padded_keys(const emu::AttentionShape& sh) {
    return (sh.n_kv + fp8::key_panel - 1) / fp8::key_panel * fp8::key_panel;
}

// V [heads][n_kv][d] as V^T [heads][d][n_kv padded to 32], each 32 keys permuted, the padding zeros.
std::vector<std::uint8_t> permuted_v_transposed(const std::vector<std::uint32_t>& v, const emu::AttentionShape& sh) {
    const std::uint64_t n = padded_keys(sh), d = sh.d_v;
    std::vector<std::uint8_t> vt(sh.heads * d * n, 0);
    for (std::uint64_t h = 0; h < sh.heads; ++h)
        for (std::uint64_t k = 0; k < n; ++k) {
            const std::uint64_t key =
                k / fp8::key_panel * fp8::key_panel +
                static_cast<std::uint64_t>(fp8::permuted_key(static_cast<int>(k % fp8::key_panel)));
            if (key >= sh.n_kv) continue;
            for (std::uint64_t c = 0; c < d; ++c)
                vt[(h * d + c) * n + k] = static_cast<std::uint8_t>(v[(h * sh.n_kv + key) * d + c]);
        }
    return vt;
}

struct Buffers {
    DeviceBuffer<std::uint8_t> q, k, vt;
    DeviceBuffer<std::uint16_t> o;
    DeviceBuffer<float> lse, lse2, o_f32;
};

// Q or K [heads][n][d] E4M3 as boxes of d x `rows`, a row one swizzle span.
TmaMap qk_map(const DeviceBuffer<std::uint8_t>& b, const emu::AttentionShape& sh, std::uint64_t n, std::uint32_t rows) {
    const std::uint64_t dims[3] = {sh.d, n, sh.heads};
    const std::uint32_t box[3] = {static_cast<std::uint32_t>(sh.d), rows, 1};
    return tensor_map_3d(b.get(), 1, dims, sh.d, sh.d * n, box, sh.d == 64 ? Swizzle::b64 : Swizzle::b128);
}

// V^T [heads][d][keys] as boxes of 32 keys x d in the 32-byte swizzle.
TmaMap vt_map(const DeviceBuffer<std::uint8_t>& b, const emu::AttentionShape& sh) {
    const std::uint64_t n = padded_keys(sh);
    const std::uint64_t dims[3] = {n, sh.d_v, sh.heads};
    const std::uint32_t box[3] = {fp8::key_panel, static_cast<std::uint32_t>(sh.d_v), 1};
    return tensor_map_3d(b.get(), 1, dims, n, n * sh.d_v, box, Swizzle::b32);
}

class Fp8Run {
public:
    Fp8Run(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh, const emu::AttentionOperands& in)
        : sh_(sh),
          ctx_(emu::flash_context(recipe, sh)),
          b_{uploaded(bytes_of(in.q)),
             uploaded(bytes_of(in.k)),
             uploaded(permuted_v_transposed(in.v, sh)),
             DeviceBuffer<std::uint16_t>(outputs()),
             DeviceBuffer<float>(rows()),
             DeviceBuffer<float>(rows()),
             DeviceBuffer<float>(outputs())} {
        params_.q_map = qk_map(b_.q, sh_, sh_.n_q, hopper::block_m);
        params_.k_map =
            qk_map(b_.k, sh_, sh_.n_kv, static_cast<std::uint32_t>(sh_.d == 64 ? fp8::block_n<64> : fp8::block_n<128>));
        params_.vt_map = vt_map(b_.vt, sh_);
        params_.o = b_.o.get(), params_.lse = b_.lse.get(), params_.lse2 = b_.lse2.get(), params_.o_f32 = nullptr;
        params_.n_q = sh_.n_q, params_.n_kv = sh_.n_kv, params_.causal = sh_.causal;
        params_.reverse = ctx_.recipe.tiles.kv_order == emu::KvOrder::reverse;
        params_.softmax = ctx_.softmax;
        b_.o.poison();  // NaN until the kernel writes them
        b_.o_f32.poison();
        b_.lse.poison();
        b_.lse2.poison();
    }

    void run(bool with_o_f32) {
        fp8::ForwardParams p = params_;
        p.o_f32 = with_o_f32 ? b_.o_f32.get() : nullptr;
        if (sh_.d == 64)
            run_for_d<64>(p);
        else
            run_for_d<128>(p);
    }

    // The kernel instantiated for exp2's argument's form (no branch per score).
    template <int D>
    void run_for_d(const fp8::ForwardParams& p) {
        if (ctx_.softmax.exp2_arg == emu::Exp2Arg::fma)
            run_for_arg<D, emu::Exp2Arg::fma>(p);
        else
            run_for_arg<D, emu::Exp2Arg::mul_sub>(p);
    }

    // exp2 is ex2.approx.ftz alone (the capabilities refuse the others): each instantiation is
    // about 100 KB of sm_90a code in every program that links the kernels, and the GPU kit is held
    // to the device call's carry limit
    template <int D, emu::Exp2Arg Arg>
    void run_for_arg(const fp8::ForwardParams& p) {
        run_kernel(fp8::forward_kernel<D, emu::Exp2Kind::hardware_ftz, Arg>, fp8::shared_bytes<D>, p);
    }

    emu::ForwardResult result() const {
        emu::ForwardResult out;
        const std::vector<std::uint16_t> o = downloaded(b_.o, outputs());
        out.o.assign(o.begin(), o.end());
        out.o_f32 = downloaded(b_.o_f32, outputs());
        out.lse = downloaded(b_.lse, rows());
        out.lse_log2 = downloaded(b_.lse2, rows());
        return out;
    }

private:
    template <class Kernel>
    void run_kernel(Kernel kernel, std::size_t bytes, const fp8::ForwardParams& p) const {
        const dim3 grid(static_cast<unsigned>((sh_.n_q + hopper::block_m - 1) / hopper::block_m),
                        static_cast<unsigned>(sh_.heads));
        launch("Hopper FP8 flash forward kernel", kernel, grid, hopper::threads, bytes, p);
    }

    std::size_t outputs() const { return sh_.heads * sh_.n_q * sh_.d_v; }
    std::size_t rows() const { return sh_.heads * sh_.n_q; }

    const emu::AttentionShape& sh_;
    emu::FlashContext ctx_;
    Buffers b_;
    fp8::ForwardParams params_{};  // O in float32 not written unless asked
};

void require_supported(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh) {
    const std::string why = hopper_fp8_flash_unsupported(recipe, sh);
    if (!why.empty()) throw Error("the FP8 Hopper kernel cannot run recipe '" + recipe.name + "': " + why);
}

}  // namespace

std::string hopper_fp8_flash_unsupported(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh) {
    std::string why = emu::capability_refusal(emu::kernel_named("hopper-fp8"), recipe, false);
    if (!why.empty()) return why;
    if (sh.d != sh.d_v || (sh.d != 64 && sh.d != 128)) return "its head dimension is 64 or 128 (d = d_v)";
    if (const std::string problem = problem_unsupported(sh); !problem.empty()) return problem;
    if (sh.n_q == 0 || sh.n_kv == 0 || sh.heads == 0) return "it needs at least one head, query and key";
    if (sh.n_q > (1u << 31) || sh.n_kv > (1u << 31) - fp8::key_panel || sh.heads > 65535)
        return "TMA coordinates are 32-bit and a grid has at most 65535 heads";
    const DeviceLimits device = device_limits();
    if (device.arch != "sm90") return "it needs an sm_90 GPU (wgmma, TMA); " + device.name + " is " + device.arch;
    const std::size_t need = sh.d == 64 ? fp8::shared_bytes<64> : fp8::shared_bytes<128>;
    if (need > device.shared_per_block)
        return "it needs " + std::to_string(need / 1024) + " KiB of shared memory per block; " + device.name +
               " allows " + std::to_string(device.shared_per_block / 1024) + " KiB";
    return {};
}

emu::ForwardResult hopper_fp8_flash_forward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh,
                                            const emu::AttentionOperands& in) {
    require_supported(recipe, sh);
    Fp8Run run(recipe, sh, in);
    run.run(true);
    return run.result();
}

std::vector<double> time_hopper_fp8_flash_forward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh,
                                                  const emu::AttentionOperands& in, int repeats) {
    require_supported(recipe, sh);
    Fp8Run run(recipe, sh, in);
    run.run(false);  // the first launch pays for module loading and caches
    std::vector<double> seconds;
    KernelTimer timer;
    for (int i = 0; i < repeats; ++i) {
        timer.reset();
        run.run(false);
        seconds.push_back(timer.seconds());
    }
    return seconds;
}

}  // namespace roundscope::gpu
