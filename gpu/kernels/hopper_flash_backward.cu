// The Hopper backward kernels' host side: what they run, their buffers and TMA maps, the three
// launches (delta, dK/dV, dQ).
#include <string>

#include "emu/attention/flash/flash_context.hpp"
#include "emu/attention/recipe/kernel_capabilities.hpp"
#include "gpu/kernels/hopper/backward/delta_kernel.cuh"
#include "gpu/kernels/hopper/backward/dk_dv_kernel.cuh"
#include "gpu/kernels/hopper/backward/dq_kernel.cuh"
#include "gpu/kernels/hopper_flash.hpp"
#include "gpu/kernels/hopper_flash_backward.hpp"
#include "gpu/primitives/runtime.hpp"
#include "gpu/primitives/tensor_map.hpp"
#include "lib/error.hpp"

namespace roundscope::gpu {
namespace {

namespace bw = hopper::backward;

std::vector<std::uint16_t> low_halves(const std::vector<std::uint32_t>& x) {
    std::vector<std::uint16_t> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<std::uint16_t>(x[i]);
    return y;
}

// A head-major [heads][n][d] BF16 tensor as 128-byte-swizzled boxes of 64 columns x 128 rows.
TmaMap tile_map(const DeviceBuffer<std::uint16_t>& b, const emu::AttentionShape& sh, std::uint64_t n) {
    const std::uint64_t dims[3] = {sh.d, n, sh.heads};
    const std::uint32_t box[3] = {hopper::panel_cols, hopper::block_m, 1};
    return tensor_map_3d_bf16(b.get(), dims, 2 * sh.d, 2 * sh.d * n, box, Swizzle::b128);
}

class BackwardRun {
public:
    BackwardRun(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh, const emu::AttentionOperands& in,
                const emu::ForwardResult& forward)
        : sh_(sh),
          ctx_(emu::flash_context(recipe, sh)),
          q_(uploaded(low_halves(in.q))),
          k_(uploaded(low_halves(in.k))),
          v_(uploaded(low_halves(in.v))),
          do_(uploaded(low_halves(in.d_o))),
          do_bits_(uploaded(in.d_o)),
          o_bits_(uploaded(forward.o)),
          lse2_(uploaded(forward.lse_log2)),
          delta_(rows()),
          dq_(in.q.size()),
          dk_(in.k.size()),
          dv_(in.v.size()) {
        dq_.poison(), dk_.poison(), dv_.poison(), delta_.poison();
        params_ = {tile_map(q_, sh, sh.n_q),
                   tile_map(k_, sh, sh.n_kv),
                   tile_map(v_, sh, sh.n_kv),
                   tile_map(do_, sh, sh.n_q),
                   lse2_.get(),
                   delta_.get(),
                   dq_.get(),
                   dk_.get(),
                   dv_.get(),
                   sh.n_q,
                   sh.n_kv,
                   sh.causal,
                   ctx_.scale_log2,
                   ctx_.dk_dq_scale(),
                   ctx_.exp2,
                   ctx_.recipe.softmax.exp2_arg};
    }

    void run() {
        const auto blocks = [](std::uint64_t n, std::uint64_t per) {
            return static_cast<unsigned>((n + per - 1) / per);
        };
        launch("Hopper backward delta kernel", bw::delta_kernel, dim3(blocks(rows(), 128)), 128, 0, do_bits_.get(),
               o_bits_.get(), delta_.get(), static_cast<std::uint64_t>(rows()), static_cast<int>(sh_.d),
               *ctx_.recipe.output.format);
        const dim3 key_grid(blocks(sh_.n_kv, hopper::block_n), static_cast<unsigned>(sh_.heads));
        const dim3 row_grid(blocks(sh_.n_q, hopper::block_m), static_cast<unsigned>(sh_.heads));
        if (sh_.d == 64) {
            launch("Hopper backward dK/dV kernel", bw::dk_dv_kernel<64>, key_grid, hopper::threads,
                   bw::backward_shared_bytes<64>, params_);
            launch("Hopper backward dQ kernel", bw::dq_kernel<64>, row_grid, hopper::threads,
                   bw::backward_shared_bytes<64>, params_);
        } else {
            launch("Hopper backward dK/dV kernel", bw::dk_dv_kernel<128>, key_grid, hopper::threads,
                   bw::backward_shared_bytes<128>, params_);
            launch("Hopper backward dQ kernel", bw::dq_kernel<128>, row_grid, hopper::threads,
                   bw::backward_shared_bytes<128>, params_);
        }
    }

    emu::BackwardResult result() const {
        emu::BackwardResult out;
        const auto widened = [](const std::vector<std::uint16_t>& x) {
            return std::vector<std::uint32_t>(x.begin(), x.end());
        };
        out.dq = widened(downloaded(dq_, rows() * sh_.d));
        out.dk = widened(downloaded(dk_, sh_.heads * sh_.n_kv * sh_.d));
        out.dv = widened(downloaded(dv_, sh_.heads * sh_.n_kv * sh_.d));
        out.delta = downloaded(delta_, rows());
        return out;
    }

private:
    std::size_t rows() const { return sh_.heads * sh_.n_q; }

    const emu::AttentionShape& sh_;
    emu::FlashContext ctx_;
    DeviceBuffer<std::uint16_t> q_, k_, v_, do_;
    DeviceBuffer<std::uint32_t> do_bits_, o_bits_;  // for delta (steps::delta_rowsum_f32 reads 32-bit words)
    DeviceBuffer<float> lse2_, delta_;
    DeviceBuffer<std::uint16_t> dq_, dk_, dv_;
    bw::BackwardParams params_{};
};

void require_runnable(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh,
                      const emu::AttentionOperands& in, const emu::ForwardResult& forward) {
    const std::string why = hopper_flash_backward_unsupported(recipe, sh);
    if (!why.empty()) throw Error("the Hopper backward cannot run recipe '" + recipe.name + "': " + why);
    const std::size_t rows = sh.heads * sh.n_q;
    if (in.d_o.size() != rows * sh.d_v)
        throw Error("the Hopper backward needs a tensor 'do' of shape [.., Nq, Dv] (" + std::to_string(rows * sh.d_v) +
                    " elements; it has " + std::to_string(in.d_o.size()) + ")");
    if (forward.o.size() != rows * sh.d_v || forward.lse_log2.size() != rows)
        throw Error("the Hopper backward needs the forward's O and LSE of this shape");
}

}  // namespace

std::string hopper_flash_backward_unsupported(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh) {
    if (recipe.target.input->bits == 8) return "the FP8 Hopper kernel has no backward pass (8-bit inputs)";
    if (std::string why = emu::capability_refusal(emu::kernel_named("hopper"), recipe, true); !why.empty()) return why;
    return hopper_flash_unsupported(recipe, sh);
}

emu::BackwardResult hopper_flash_backward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh,
                                          const emu::AttentionOperands& in, const emu::ForwardResult& forward) {
    require_runnable(recipe, sh, in, forward);
    BackwardRun run(recipe, sh, in, forward);
    run.run();
    return run.result();
}

std::vector<double> time_hopper_flash_backward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh,
                                               const emu::AttentionOperands& in, const emu::ForwardResult& forward,
                                               int repeats) {
    require_runnable(recipe, sh, in, forward);
    BackwardRun run(recipe, sh, in, forward);
    run.run();  // the first run pays for module loading and caches
    std::vector<double> seconds;
    KernelTimer timer;  // the kernels' own time (CUDA events), not the host's around them
    for (int i = 0; i < repeats; ++i) {
        timer.reset();
        run.run();
        seconds.push_back(timer.seconds());
    }
    return seconds;
}

}  // namespace roundscope::gpu
