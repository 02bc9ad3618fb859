// The flash-attention kernels: forward (online softmax over KV tiles in the recipe's order),
// and backward (dK, dV per KV block over the row blocks in order; dQ per row block from the
// stored dS). Each follows emu/attention/flash/flash_forward.cpp and emu/attention/flash/flash_backward.cpp step for
// step; the scalar steps are the same functions (emu/attention/softmax/attention_steps.hpp).
#include <algorithm>
#include <string>

#include "emu/attention/flash/flash_context.hpp"
#include "emu/attention/recipe/kernel_capabilities.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "gpu/kernels/flash_attention.hpp"
#include "gpu/kernels/flash_kernels.cuh"
#include "gpu/kernels/problem_support.hpp"
#include "gpu/primitives/runtime.hpp"
#include "gpu/primitives/warp.hpp"  // not used yet: nvcc compiles the warp primitives here for the fast kernel

namespace roundscope::gpu {
namespace {

namespace a = emu::f32_arith;
namespace steps = emu::steps;

constexpr int threads_per_block = 128;

// What the forward kernel reads; one head of one row block per thread block.
struct ForwardParams {
    const std::uint32_t *q, *k, *v, *v_quantized;  // v_quantized null without V quantization
    std::uint32_t* acc;                            // float32 bits [h][n_q][d_v]: the running O, then O in f32
    std::uint32_t* o;                              // o_format bits
    float *lse, *lse2;
    std::uint64_t n_q, n_kv, d, d_v;
    bool causal, reverse, diagonal_fix;
    int block_m, block_n, v_block;
    steps::OnlineSoftmax softmax;
    emu::Format o_format;
};

ROUNDSCOPE_DEVICE bool tile_masked(const ForwardParams& p, std::uint64_t row_end, std::uint64_t key0) {
    return steps::tile_masked(row_end, key0, p.n_q, p.n_kv, p.causal);
}

// P of a tile in shared memory as the A operand of P V, keeping only the keys of one pass of
// the diagonal fix (all keys without the fix).
struct PView {
    const std::uint32_t* p;
    std::uint64_t rows, keys, row0_global, key0_global, n_q, n_kv;
    int v_block, pass;  // pass -1: every key; 0: keys of complete past V blocks; 1: diagonal keys
    ROUNDSCOPE_DEVICE std::uint32_t at(std::uint64_t r, std::uint64_t c) const {
        if (r >= rows || c >= keys) return 0u;
        if (pass >= 0 && steps::diagonal_key(row0_global + r, key0_global + c, n_q, n_kv, v_block) != (pass == 1))
            return 0u;
        return p[r * keys + c];
    }
};

template <Input in>
ROUNDSCOPE_KERNEL void flash_forward_kernel(ForwardParams p) {
    std::uint32_t* shared = shared_memory<std::uint32_t>();
    const std::uint64_t head = blockIdx.y,
                        row0 = static_cast<std::uint64_t>(blockIdx.x) * static_cast<std::uint64_t>(p.block_m);
    const std::uint64_t rows = std::min<std::uint64_t>(static_cast<std::uint64_t>(p.block_m), p.n_q - row0);
    const std::uint64_t bn = static_cast<std::uint64_t>(p.block_n);
    std::uint32_t* tile = shared;                                                            // S, then P: [rows][keys]
    auto* state = reinterpret_cast<steps::OnlineRowState*>(shared + p.block_m * p.block_n);  // [rows]
    auto* factor = reinterpret_cast<float*>(state + p.block_m);                              // [rows]
    const std::uint32_t* q = p.q + (head * p.n_q + row0) * p.d;
    const std::uint32_t* k = p.k + head * p.n_kv * p.d;
    std::uint32_t* acc = p.acc + (head * p.n_q + row0) * p.d_v;
    for (std::uint64_t r = threadIdx.x; r < rows; r += blockDim.x) state[r] = steps::OnlineRowState{};
    for (std::uint64_t x = threadIdx.x; x < rows * p.d_v; x += blockDim.x) acc[x] = 0;
    sync_threads();

    const std::uint64_t tiles = (p.n_kv + bn - 1) / bn;
    for (std::uint64_t step = 0; step < tiles; ++step) {
        const std::uint64_t key0 = (p.reverse ? tiles - 1 - step : step) * bn;
        const std::uint64_t keys = std::min(bn, p.n_kv - key0);
        if (tile_masked(p, row0 + rows, key0)) continue;
        // S = Q K^T
        const MatrixView q_view{q, rows, p.d, p.d};
        const TransposedView kt_view{MatrixView{k + key0 * p.d, keys, p.d, p.d}};
        block_mma<in>(
            q_view, kt_view, rows, keys, p.d, [](std::uint64_t, std::uint64_t) { return 0u; },
            [&](std::uint64_t r, std::uint64_t c, std::uint32_t bits) { tile[r * keys + c] = bits; });
        sync_threads();
        // the softmax row step, P cast in place
        for (std::uint64_t r = threadIdx.x; r < rows; r += blockDim.x) {
            const std::uint64_t visible = steps::visible_keys(row0 + r, p.n_q, p.n_kv, p.causal);
            const int in_tile = visible <= key0 ? 0 : static_cast<int>(std::min(visible - key0, keys));
            factor[r] = steps::online_row_step(p.softmax, tile + r * keys, static_cast<int>(keys), in_tile, state[r],
                                               tile + r * keys, nullptr);
        }
        sync_threads();
        for (std::uint64_t x = threadIdx.x; x < rows * p.d_v; x += blockDim.x)
            acc[x] = bits_of(a::mul(float_from_bits(acc[x]), factor[x / p.d_v]));
        sync_threads();
        // acc = P V + acc: one product, or under the diagonal fix the past keys with V quantized
        // and then the diagonal keys with V as it is
        const bool split = p.v_quantized != nullptr && p.diagonal_fix;
        for (int pass = split ? 0 : -1; pass <= (split ? 1 : -1); ++pass) {
            const std::uint32_t* v =
                (pass == 1 || p.v_quantized == nullptr ? p.v : p.v_quantized) + (head * p.n_kv + key0) * p.d_v;
            const PView p_view{tile, rows, keys, row0, key0, p.n_q, p.n_kv, p.v_block, pass};
            const MatrixView v_view{v, keys, p.d_v, p.d_v};
            block_mma<in>(
                p_view, v_view, rows, p.d_v, keys, [&](std::uint64_t r, std::uint64_t c) { return acc[r * p.d_v + c]; },
                [&](std::uint64_t r, std::uint64_t c, std::uint32_t bits) { acc[r * p.d_v + c] = bits; });
            sync_threads();
        }
    }
    for (std::uint64_t x = threadIdx.x; x < rows * p.d_v; x += blockDim.x) {
        const float o = a::mul(float_from_bits(acc[x]), steps::output_factor(state[x / p.d_v].l, p.softmax.p_scale));
        acc[x] = bits_of(o);
        p.o[(head * p.n_q + row0) * p.d_v + x] = steps::saturating_cast(o, p.o_format);
    }
    for (std::uint64_t r = threadIdx.x; r < rows; r += blockDim.x) {
        const float l2 = steps::lse_log2(state[r].m, state[r].l);
        p.lse2[head * p.n_q + row0 + r] = l2;
        p.lse[head * p.n_q + row0 + r] = a::mul(l2, steps::ln2);
    }
}

// ---- backward -------------------------------------------------------------------------------

struct BackwardParams {
    const std::uint32_t *q, *k;               // input format (for S)
    const std::uint32_t *qg, *kg, *vg, *dog;  // ds_format
    const float *lse2, *delta;
    std::uint32_t* ds;                        // [h][n_q][n_kv]: dS cast, for the dQ pass
    std::uint32_t *dk_acc, *dv_acc, *dq_acc;  // float32 bits
    std::uint64_t n_q, n_kv, d, d_v;
    bool causal;
    emu::Exp2Kind exp2;
    int block_m, block_n;
    float scale_log2;
    emu::Format g;
};

// dK and dV of one KV block (blockIdx.x) of one head (blockIdx.y), over the row blocks in order.
template <Input in, Input grad>
ROUNDSCOPE_KERNEL void flash_dk_dv_kernel(BackwardParams p) {
    std::uint32_t* shared = shared_memory<std::uint32_t>();
    const std::uint64_t head = blockIdx.y, bm = static_cast<std::uint64_t>(p.block_m);
    const std::uint64_t key0 = static_cast<std::uint64_t>(blockIdx.x) * static_cast<std::uint64_t>(p.block_n);
    const std::uint64_t keys = std::min<std::uint64_t>(static_cast<std::uint64_t>(p.block_n), p.n_kv - key0);
    std::uint32_t* s = shared;                           // S, then P cast: [rows][keys]
    std::uint32_t* dp = shared + p.block_m * p.block_n;  // dP, then dS cast
    std::uint32_t* dv_acc = p.dv_acc + (head * p.n_kv + key0) * p.d_v;
    std::uint32_t* dk_acc = p.dk_acc + (head * p.n_kv + key0) * p.d;
    for (std::uint64_t row0 = 0; row0 < p.n_q; row0 += bm) {
        const std::uint64_t rows = std::min(bm, p.n_q - row0);
        if (steps::tile_masked(row0 + rows, key0, p.n_q, p.n_kv, p.causal)) continue;
        const MatrixView q_view{p.q + (head * p.n_q + row0) * p.d, rows, p.d, p.d};
        const TransposedView kt_view{MatrixView{p.k + (head * p.n_kv + key0) * p.d, keys, p.d, p.d}};
        block_mma<in>(
            q_view, kt_view, rows, keys, p.d, [](std::uint64_t, std::uint64_t) { return 0u; },
            [&](std::uint64_t r, std::uint64_t c, std::uint32_t bits) { s[r * keys + c] = bits; });
        const MatrixView do_view{p.dog + (head * p.n_q + row0) * p.d_v, rows, p.d_v, p.d_v};
        const TransposedView vt_view{MatrixView{p.vg + (head * p.n_kv + key0) * p.d_v, keys, p.d_v, p.d_v}};
        block_mma<grad>(
            do_view, vt_view, rows, keys, p.d_v, [](std::uint64_t, std::uint64_t) { return 0u; },
            [&](std::uint64_t r, std::uint64_t c, std::uint32_t bits) { dp[r * keys + c] = bits; });
        sync_threads();
        for (std::uint64_t x = threadIdx.x; x < rows * keys; x += blockDim.x) {
            const std::uint64_t i = row0 + x / keys, j = key0 + x % keys;
            const steps::BackwardElement e =
                steps::backward_element(s[x], dp[x], j < steps::visible_keys(i, p.n_q, p.n_kv, p.causal),
                                        p.lse2[head * p.n_q + i], p.delta[head * p.n_q + i], p.scale_log2, p.exp2, p.g);
            s[x] = e.p_cast, dp[x] = e.ds_cast;
            p.ds[(head * p.n_q + i) * p.n_kv + j] = e.ds_cast;
        }
        sync_threads();
        const TransposedView pt_view{MatrixView{s, rows, keys, keys}}, dst_view{MatrixView{dp, rows, keys, keys}};
        const MatrixView qg_view{p.qg + (head * p.n_q + row0) * p.d, rows, p.d, p.d};
        block_mma<grad>(
            pt_view, do_view, keys, p.d_v, rows,
            [&](std::uint64_t r, std::uint64_t c) { return dv_acc[r * p.d_v + c]; },
            [&](std::uint64_t r, std::uint64_t c, std::uint32_t bits) { dv_acc[r * p.d_v + c] = bits; });
        block_mma<grad>(
            dst_view, qg_view, keys, p.d, rows, [&](std::uint64_t r, std::uint64_t c) { return dk_acc[r * p.d + c]; },
            [&](std::uint64_t r, std::uint64_t c, std::uint32_t bits) { dk_acc[r * p.d + c] = bits; });
        sync_threads();
    }
}

// dQ of one row block (blockIdx.x) of one head (blockIdx.y), over the KV blocks in order.
template <Input grad>
ROUNDSCOPE_KERNEL void flash_dq_kernel(BackwardParams p) {
    const std::uint64_t head = blockIdx.y, bn = static_cast<std::uint64_t>(p.block_n);
    const std::uint64_t row0 = static_cast<std::uint64_t>(blockIdx.x) * static_cast<std::uint64_t>(p.block_m);
    const std::uint64_t rows = std::min<std::uint64_t>(static_cast<std::uint64_t>(p.block_m), p.n_q - row0);
    std::uint32_t* dq_acc = p.dq_acc + (head * p.n_q + row0) * p.d;
    for (std::uint64_t key0 = 0; key0 < p.n_kv; key0 += bn) {
        const std::uint64_t keys = std::min(bn, p.n_kv - key0);
        if (steps::tile_masked(row0 + rows, key0, p.n_q, p.n_kv, p.causal)) continue;
        const MatrixView ds_view{p.ds + (head * p.n_q + row0) * p.n_kv + key0, rows, keys, p.n_kv};
        const MatrixView k_view{p.kg + (head * p.n_kv + key0) * p.d, keys, p.d, p.d};
        block_mma<grad>(
            ds_view, k_view, rows, p.d, keys, [&](std::uint64_t r, std::uint64_t c) { return dq_acc[r * p.d + c]; },
            [&](std::uint64_t r, std::uint64_t c, std::uint32_t bits) { dq_acc[r * p.d + c] = bits; });
        sync_threads();
    }
}

// ---- host -------------------------------------------------------------------------------------

// Shared memory per block: S/P of a tile, and the forward's row state and factors; the
// backward's S/P and dP/dS.
std::size_t forward_shared_bytes(const emu::AttentionRecipe& r) {
    return sizeof(std::uint32_t) * r.tiles.block_m * r.tiles.block_n +
           (sizeof(steps::OnlineRowState) + sizeof(float)) * r.tiles.block_m;
}
std::size_t backward_shared_bytes(const emu::AttentionRecipe& r) {
    return 2 * sizeof(std::uint32_t) * r.tiles.block_m * r.tiles.block_n;
}

void require_supported(const emu::AttentionRecipe& r, bool backward) {
    std::string why = flash_unsupported(r, backward);
    if (why.empty()) why = flash_not_runnable_here(r, backward);
    if (!why.empty()) throw Error("recipe '" + r.name + "': " + why);
}

template <Input in>
void forward_launch(const ForwardParams& p, dim3 grid, std::size_t bytes) {
    launch("flash forward kernel", flash_forward_kernel<in>, grid, threads_per_block, bytes, p);
}

template <Input in, Input grad>
void backward_launch(const BackwardParams& p, dim3 key_grid, dim3 row_grid, std::size_t bytes) {
    launch("flash dK/dV kernel", flash_dk_dv_kernel<in, grad>, key_grid, threads_per_block, bytes, p);
    launch("flash dQ kernel", flash_dq_kernel<grad>, row_grid, threads_per_block, 0, p);
}

}  // namespace

std::string flash_unsupported(const emu::AttentionRecipe& r, bool backward) {
    return emu::capability_refusal(emu::kernel_named("twins"), r, backward);
}

std::string flash_not_runnable_here(const emu::AttentionRecipe& r, bool backward) {
    const DeviceLimits device = device_limits();
    for (const emu::Format* f : {r.target.input, backward ? r.backward.ds_format : r.target.input}) {
        if (emu::find_mma_model(device.arch, "mma.sync", *f, *f, emu::f32) == nullptr)
            return "no mma.sync model for " + std::string(f->name) + " inputs on " + device.arch + " (" + device.name +
                   ")";
    }
    const std::size_t need =
        backward ? std::max(forward_shared_bytes(r), backward_shared_bytes(r)) : forward_shared_bytes(r);
    if (need > device.shared_per_block) {
        return "needs " + std::to_string(need / 1024) + " KiB of shared memory per block" +
               (backward ? " (forward and backward)" : "") + "; " + device.name + " allows " +
               std::to_string(device.shared_per_block / 1024) + " KiB";
    }
    return {};
}

namespace {

// The forward pass's device buffers and launch, set up once: run() launches the kernel (and
// returns when it has finished), result() downloads the outputs.
class ForwardRun {
public:
    ForwardRun(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh, const emu::AttentionOperands& in)
        : recipe_(recipe),
          sh_(sh),
          ctx_(emu::flash_context(recipe, sh)),
          v_quantized_(emu::quantized_v(ctx_, in.v)),
          q_(uploaded(in.q)),
          k_(uploaded(in.k)),
          v_(uploaded(in.v)),
          vq_(uploaded(v_quantized_)),
          acc_(outputs()),
          o_(outputs()),
          lse_(sh.heads * sh.n_q),
          lse2_(sh.heads * sh.n_q) {}

    void run() {
        const ForwardParams p{q_.get(),
                              k_.get(),
                              v_.get(),
                              v_quantized_.empty() ? nullptr : vq_.get(),
                              acc_.get(),
                              o_.get(),
                              lse_.get(),
                              lse2_.get(),
                              sh_.n_q,
                              sh_.n_kv,
                              sh_.d,
                              sh_.d_v,
                              sh_.causal,
                              recipe_.tiles.kv_order == emu::KvOrder::reverse,
                              recipe_.p_and_v.diagonal_fix,
                              recipe_.tiles.block_m,
                              recipe_.tiles.block_n,
                              recipe_.p_and_v.v_block,
                              ctx_.softmax,
                              *recipe_.output.format};
        const dim3 grid(static_cast<unsigned>((sh_.n_q + recipe_.tiles.block_m - 1) / recipe_.tiles.block_m),
                        static_cast<unsigned>(sh_.heads));
        const std::size_t bytes = forward_shared_bytes(recipe_);
        if (sh_.n_q > 0 && sh_.heads > 0)
            with_input(input_of(*recipe_.target.input), [&]<Input in>() { forward_launch<in>(p, grid, bytes); });
    }

    emu::ForwardResult result() const {
        emu::ForwardResult out;
        out.o = downloaded(o_, outputs());
        const std::vector<std::uint32_t> o_f32 = downloaded(acc_, outputs());
        out.o_f32.resize(outputs());
        for (std::size_t x = 0; x < outputs(); ++x) out.o_f32[x] = float_from_bits(o_f32[x]);
        out.lse = downloaded(lse_, sh_.heads * sh_.n_q);
        out.lse_log2 = downloaded(lse2_, sh_.heads * sh_.n_q);
        return out;
    }

private:
    std::size_t outputs() const { return sh_.heads * sh_.n_q * sh_.d_v; }

    const emu::AttentionRecipe& recipe_;
    const emu::AttentionShape& sh_;
    emu::FlashContext ctx_;
    std::vector<std::uint32_t> v_quantized_;
    DeviceBuffer<std::uint32_t> q_, k_, v_, vq_, acc_, o_;
    DeviceBuffer<float> lse_, lse2_;
};

}  // namespace

emu::ForwardResult flash_forward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh,
                                 const emu::AttentionOperands& in) {
    require_supported(recipe, false);
    require_problem(sh);
    ForwardRun run(recipe, sh, in);
    run.run();
    return run.result();
}

std::vector<double> time_flash_forward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh,
                                       const emu::AttentionOperands& in, int repeats) {
    require_supported(recipe, false);
    require_problem(sh);
    ForwardRun run(recipe, sh, in);
    run.run();  // the first launch pays for module loading and caches
    std::vector<double> seconds;
    KernelTimer timer;  // the kernels' own time (CUDA events), not the host's around them
    for (int i = 0; i < repeats; ++i) {
        timer.reset();
        run.run();
        seconds.push_back(timer.seconds());
    }
    return seconds;
}

emu::BackwardResult flash_backward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh,
                                   const emu::AttentionOperands& in, const emu::ForwardResult& forward) {
    require_supported(recipe, true);
    require_problem(sh);
    const emu::FlashContext ctx = emu::flash_context(recipe, sh);
    const emu::Format& g = *recipe.backward.ds_format;
    const std::uint64_t heads = sh.heads, nq = sh.n_q, nk = sh.n_kv;
    const std::vector<float> delta = emu::delta_from_o(ctx, in, forward);  // a row sum per query, on the host
    DeviceBuffer<std::uint32_t> q = uploaded(in.q), k = uploaded(in.k);
    DeviceBuffer<std::uint32_t> qg = uploaded(emu::exact_in(in.q, *recipe.target.input, g, "q (backward)"));
    DeviceBuffer<std::uint32_t> kg = uploaded(emu::exact_in(in.k, *recipe.target.input, g, "k (backward)"));
    DeviceBuffer<std::uint32_t> vg = uploaded(emu::exact_in(in.v, *recipe.target.input, g, "v (backward)"));
    DeviceBuffer<std::uint32_t> dog = uploaded(emu::exact_in(in.d_o, *recipe.target.input, g, "do (backward)"));
    DeviceBuffer<float> lse2 = uploaded(forward.lse_log2), d_delta = uploaded(delta);
    DeviceBuffer<std::uint32_t> ds = zeroed<std::uint32_t>(heads * nq * nk);
    DeviceBuffer<std::uint32_t> dk_acc = zeroed<std::uint32_t>(in.k.size());
    DeviceBuffer<std::uint32_t> dv_acc = zeroed<std::uint32_t>(in.v.size());
    DeviceBuffer<std::uint32_t> dq_acc = zeroed<std::uint32_t>(in.q.size());
    const BackwardParams p{q.get(),
                           k.get(),
                           qg.get(),
                           kg.get(),
                           vg.get(),
                           dog.get(),
                           lse2.get(),
                           d_delta.get(),
                           ds.get(),
                           dk_acc.get(),
                           dv_acc.get(),
                           dq_acc.get(),
                           nq,
                           nk,
                           sh.d,
                           sh.d_v,
                           sh.causal,
                           ctx.exp2,
                           recipe.tiles.block_m,
                           recipe.tiles.block_n,
                           ctx.scale_log2,
                           g};
    const dim3 key_grid(static_cast<unsigned>((nk + recipe.tiles.block_n - 1) / recipe.tiles.block_n),
                        static_cast<unsigned>(heads));
    const dim3 row_grid(static_cast<unsigned>((nq + recipe.tiles.block_m - 1) / recipe.tiles.block_m),
                        static_cast<unsigned>(heads));
    const std::size_t bytes = backward_shared_bytes(recipe);
    if (nq > 0 && nk > 0 && heads > 0) {
        if (!(g == emu::bf16 || g == emu::f16))
            throw Error("recipe '" + recipe.name + "': ds_format " + std::string(g.name) +
                        " passed the capability table, which runs bf16 and f16 only");  // a bug, not a refusal
        with_input(input_of(*recipe.target.input), [&]<Input in>() {
            if (g == emu::bf16)
                backward_launch<in, Input::bf16>(p, key_grid, row_grid, bytes);
            else
                backward_launch<in, Input::f16>(p, key_grid, row_grid, bytes);
        });
    }
    emu::BackwardResult out;
    out.delta = delta;
    auto finish = [&](const DeviceBuffer<std::uint32_t>& acc, std::size_t n, float scale) {
        std::vector<std::uint32_t> bits = downloaded(acc, n);
        for (auto& b : bits) b = steps::gradient_bits(b, scale, *recipe.backward.grad_format);
        return bits;
    };
    out.dq = finish(dq_acc, in.q.size(), sh.scale);
    out.dk = finish(dk_acc, in.k.size(), sh.scale);
    out.dv = finish(dv_acc, in.v.size(), 1.0f);
    return out;
}

}  // namespace roundscope::gpu
