// The Hopper forward kernel's host side: what it runs, its buffers and TMA maps, its launch.
#include <string>

#include "emu/attention/flash/flash_context.hpp"
#include "emu/attention/recipe/kernel_capabilities.hpp"
#include "gpu/kernels/hopper_flash.hpp"
#include "gpu/kernels/hopper_flash_kernel.cuh"
#include "gpu/kernels/hopper_fp8_flash.hpp"
#include "gpu/kernels/problem_support.hpp"
#include "gpu/primitives/runtime.hpp"
#include "gpu/primitives/tensor_map.hpp"
#include "lib/error.hpp"

namespace roundscope::gpu {
namespace {

static_assert(hopper::block_m == 128 && hopper::block_n == 128,
              "the Hopper kernel's row of emu/attention/recipe/kernel_capabilities.cpp says 128 x 128 tiles");

struct Buffers {
    DeviceBuffer<std::uint16_t> q, k, v, o;
    DeviceBuffer<float> lse, lse2, o_f32;
};

std::vector<std::uint16_t> bf16_bits(const std::vector<std::uint32_t>& x) {
    std::vector<std::uint16_t> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<std::uint16_t>(x[i]);
    return y;
}

// A head-major [heads][n][d] BF16 tensor as 128-byte-swizzled boxes of 64 columns x `rows`.
TmaMap tensor_map(const DeviceBuffer<std::uint16_t>& b, const emu::AttentionShape& sh, std::uint64_t n,
                  std::uint32_t rows) {
    const std::uint64_t dims[3] = {sh.d, n, sh.heads};
    const std::uint32_t box[3] = {hopper::panel_cols, rows, 1};
    return tensor_map_3d_bf16(b.get(), dims, 2 * sh.d, 2 * sh.d * n, box, Swizzle::b128);
}

// The kernel's launches on buffers uploaded and TMA maps encoded once (not in the timed launches).
class HopperRun {
public:
    HopperRun(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh, const emu::AttentionOperands& in)
        : sh_(sh),
          ctx_(emu::flash_context(recipe, sh)),
          b_{uploaded(bf16_bits(in.q)),     uploaded(bf16_bits(in.k)),
             uploaded(bf16_bits(in.v)),     DeviceBuffer<std::uint16_t>(outputs()),
             DeviceBuffer<float>(rows()),   DeviceBuffer<float>(rows()),
             DeviceBuffer<float>(outputs())},
          params_{tensor_map(b_.q, sh_, sh_.n_q, hopper::block_m),
                  tensor_map(b_.k, sh_, sh_.n_kv, hopper::block_n),
                  tensor_map(b_.v, sh_, sh_.n_kv, hopper::block_n),
                  tensor_map(b_.o, sh_, sh_.n_q, hopper::block_m / 2),
                  b_.lse.get(),
                  b_.lse2.get(),
                  nullptr,
                  sh_.n_q,
                  sh_.n_kv,
                  sh_.causal,
                  ctx_.recipe.tiles.kv_order == emu::KvOrder::reverse,
                  ctx_.softmax} {
        // NaN until the kernel writes them (DeviceBuffer::poison: initcheck does not see TMA stores)
        b_.o.poison();
        b_.o_f32.poison();
        b_.lse.poison();
        b_.lse2.poison();
    }

    void run(bool with_o_f32) {
        hopper::ForwardParams p = params_;
        p.o_f32 = with_o_f32 ? b_.o_f32.get() : nullptr;
        if (sh_.d == 64)
            run_for_d<64>(p);
        else
            run_for_d<128>(p);
    }

    // The kernel instantiated for the recipe's exp2, its argument's form and whether P is scaled
    // (template arguments: no branch per score).
    template <int D>
    void run_for_d(const hopper::ForwardParams& p) {
        if (ctx_.softmax.exp2_arg == emu::Exp2Arg::fma)
            run_for_arg<D, emu::Exp2Arg::fma>(p);
        else
            run_for_arg<D, emu::Exp2Arg::mul_sub>(p);
    }

    template <int D, emu::Exp2Arg Arg>
    void run_for_arg(const hopper::ForwardParams& p) {
        if (ctx_.softmax.p_scale == 1.0f)
            run_for_scale<D, Arg, false>(p);
        else
            run_for_scale<D, Arg, true>(p);
    }

    template <int D, emu::Exp2Arg Arg, bool ScaledP>
    void run_for_scale(const hopper::ForwardParams& p) {
        constexpr std::size_t bytes = hopper::shared_bytes<D>;
        switch (ctx_.recipe.softmax.exp2) {
            case emu::Exp2Kind::software:
                run_kernel(hopper::forward_kernel<D, emu::Exp2Kind::software, Arg, ScaledP>, bytes, p);
                return;
            case emu::Exp2Kind::hardware_ftz:
                run_kernel(hopper::forward_kernel<D, emu::Exp2Kind::hardware_ftz, Arg, ScaledP>, bytes, p);
                return;
            default:  // ex2.approx (the capabilities refuse exp2f)
                run_kernel(hopper::forward_kernel<D, emu::Exp2Kind::hardware_approx, Arg, ScaledP>, bytes, p);
        }
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
    void run_kernel(Kernel kernel, std::size_t bytes, const hopper::ForwardParams& p) const {
        const dim3 grid(static_cast<unsigned>((sh_.n_q + hopper::block_m - 1) / hopper::block_m),
                        static_cast<unsigned>(sh_.heads));
        launch("Hopper flash forward kernel", kernel, grid, hopper::threads, bytes, p);
    }

    std::size_t outputs() const { return sh_.heads * sh_.n_q * sh_.d_v; }
    std::size_t rows() const { return sh_.heads * sh_.n_q; }

    const emu::AttentionShape& sh_;
    emu::FlashContext ctx_;
    Buffers b_;
    hopper::ForwardParams params_;  // O in float32 not written unless asked
};

void require_supported(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh) {
    const std::string why = hopper_flash_unsupported(recipe, sh);
    if (!why.empty()) throw Error("the Hopper kernel cannot run recipe '" + recipe.name + "': " + why);
}

// 8-bit inputs are the FP8 kernel's (hopper_fp8_flash.cu: it runs E4M3 and refuses the others,
// saying so), every other the BF16 kernel's.
bool fp8_inputs(const emu::AttentionRecipe& recipe) { return recipe.target.input->bits == 8; }

}  // namespace

std::string hopper_flash_unsupported(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh) {
    if (fp8_inputs(recipe)) return hopper_fp8_flash_unsupported(recipe, sh);
    std::string why = emu::capability_refusal(emu::kernel_named("hopper"), recipe, false);
    if (!why.empty()) return why;
    if (sh.d != sh.d_v || (sh.d != 64 && sh.d != 128)) return "its head dimension is 64 or 128 (d = d_v)";
    if (const std::string problem = problem_unsupported(sh); !problem.empty()) return problem;
    if (sh.n_q == 0 || sh.n_kv == 0 || sh.heads == 0) return "it needs at least one head, query and key";
    if (sh.n_q > (1u << 31) || sh.n_kv > (1u << 31) || sh.heads > 65535)
        return "TMA coordinates are 32-bit and a grid has at most 65535 heads";
    const DeviceLimits device = device_limits();
    if (device.arch != "sm90") return "it needs an sm_90 GPU (wgmma, TMA); " + device.name + " is " + device.arch;
    const std::size_t need = sh.d == 64 ? hopper::shared_bytes<64> : hopper::shared_bytes<128>;
    if (need > device.shared_per_block)
        return "it needs " + std::to_string(need / 1024) + " KiB of shared memory per block; " + device.name +
               " allows " + std::to_string(device.shared_per_block / 1024) + " KiB";
    return {};
}

emu::ForwardResult hopper_flash_forward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh,
                                        const emu::AttentionOperands& in) {
    if (fp8_inputs(recipe)) return hopper_fp8_flash_forward(recipe, sh, in);
    require_supported(recipe, sh);
    HopperRun run(recipe, sh, in);
    run.run(true);
    return run.result();
}

std::vector<double> time_hopper_flash_forward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh,
                                              const emu::AttentionOperands& in, int repeats) {
    if (fp8_inputs(recipe)) return time_hopper_fp8_flash_forward(recipe, sh, in, repeats);
    require_supported(recipe, sh);
    HopperRun run(recipe, sh, in);
    run.run(false);  // the first launch pays for module loading and caches
    std::vector<double> seconds;
    KernelTimer timer;  // the kernels' own time (CUDA events), not the host's around them
    for (int i = 0; i < repeats; ++i) {
        timer.reset();
        run.run(false);
        seconds.push_back(timer.seconds());
    }
    return seconds;
}

}  // namespace roundscope::gpu
