// The backward pass of the flash-attention emulator (flash_attention.hpp).
#include <fmt/format.h>

#include "emu/attention/flash/aten_cpu_backward.hpp"
#include "emu/attention/flash/aten_cpu_math_backward.hpp"
#include "emu/attention/flash/backward_refusal.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_context.hpp"
#include "emu/attention/flash/mem_eff_backward.hpp"
#include "emu/attention/flash/run_cache.hpp"
#include "emu/attention/flash/tile_product.hpp"
#include "emu/attention/math/libdevice_math.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/attention/softmax/compiled_torch_softmax.hpp"
#include "lib/error.hpp"
#include "lib/parallel.hpp"
#include "lib/splitmix.hpp"

namespace roundscope::emu {
namespace {

namespace a = f32_arith;

// One head's operands: q and k in the input format for S (the forward pass's bits), and q, k,
// v, dO in ds_format for the gradient products.
struct HeadOperands {
    const std::uint32_t *q, *k;               // input format
    const std::uint32_t *qg, *kg, *vg, *dog;  // ds_format
    const float *lse2, *delta;
    const std::uint32_t* s;  // the head's S [n_q][n_kv] from a RunCache, or null
    std::uint64_t head;
    const float* lse;  // natural units (the compiled softmax's backward)
};

// One head's operands of the gradient products as each product takes them: under grad_quant
// block-quantized along its reduction axis (dO and V along D for dP; dO and Q along the query
// rows for dV and dK; K along the keys for dQ), else the ds_format operands themselves.
struct GradOperands {
    std::vector<std::uint32_t> do_d, v_d, do_rows, q_rows, k_keys;
    const std::uint32_t *dp_do, *dp_v, *dv_do, *dk_q, *dq_k;
};

// The elements' rounding of grad_quant's blocks for operand `what` of a head or a tile (`tile`:
// its row block times the key blocks plus its key block): nearest even, or stochastic from a seed
// of its own.
CastOptions grad_rounding(const AttentionRecipe& r, std::uint64_t head, int what, std::uint64_t tile = 0) {
    CastOptions o;
    if (r.backward.stochastic) {
        o.mode = RoundingMode::stochastic_exact;
        o.seed = splitmix64(splitmix64(splitmix64(static_cast<std::uint64_t>(r.backward.seed), head), what), tile);
    }
    return o;
}

// x [rows][cols] in ds_format, block-quantized along `axis` (-2: rows, -1: cols) in grad_quant
// (set: the callers quantize only under it).
std::vector<std::uint32_t> grad_quantized(const AttentionRecipe& r, const std::uint32_t* x, std::uint64_t rows,
                                          std::uint64_t cols, int axis, const CastOptions& o, const char* what) {
    return block_fake_quantized(std::vector<std::uint32_t>(x, x + rows * cols), *r.backward.ds_format, {rows, cols},
                                axis, *r.backward.quant, 32, *r.backward.ds_format, what, o);
}

GradOperands grad_operands(const AttentionRecipe& r, const AttentionShape& sh, const HeadOperands& h) {
    GradOperands g;
    const std::uint64_t nq = sh.n_q, nk = sh.n_kv, d = sh.d, dv = sh.d_v;
    if (r.backward.quant == nullptr) {
        g.dp_do = g.dv_do = h.dog, g.dp_v = h.vg, g.dk_q = h.qg, g.dq_k = h.kg;
        return g;
    }
    g.do_d = grad_quantized(r, h.dog, nq, dv, -1, grad_rounding(r, h.head, 0), "dO (for dP)");
    g.v_d = grad_quantized(r, h.vg, nk, dv, -1, grad_rounding(r, h.head, 1), "v (for dP)");
    g.do_rows = grad_quantized(r, h.dog, nq, dv, -2, grad_rounding(r, h.head, 2), "dO (for dV)");
    g.q_rows = grad_quantized(r, h.qg, nq, d, -2, grad_rounding(r, h.head, 3), "q (for dK)");
    g.k_keys = grad_quantized(r, h.kg, nk, d, -2, grad_rounding(r, h.head, 4), "k (for dQ)");
    g.dp_do = g.do_d.data(), g.dp_v = g.v_d.data(), g.dv_do = g.do_rows.data(), g.dk_q = g.q_rows.data();
    g.dq_k = g.k_keys.data();
    return g;
}

struct BackwardModels {
    detail::TileProduct score, grad;
};

// The backward pass's view of one tile: P (float) and dS cast, [rows][keys].
struct TileGradients {
    std::vector<std::uint32_t> p_cast, ds_cast;
};

// One element of the memory-efficient backward (kernel_backward.h): P = expf(RN(s scale) - LSE) with
// the natural LSE and libdevice's expf, stored in the gradient format; dS = RN(RN(RN(dP - delta) P)
// scale) from that stored P, cast (dK and dQ need no scale after).
steps::BackwardElement mem_eff_element(std::uint32_t s, std::uint32_t dp, bool visible, float lse, float delta,
                                       float scale, const Format& g) {
    const float p = visible ? libdevice_expf(a::sub(a::mul(float_from_bits(s), scale), lse)) : 0.0f;
    const std::uint32_t p_cast = steps::saturating_cast(p, g);
    const float ds = a::mul(steps::d_score(static_cast<float>(decode(g, p_cast)), float_from_bits(dp), delta), scale);
    return {p, p_cast, steps::saturating_cast(ds, g)};
}

// One element of cuDNN's flash backward on sm_90 (grad_schedule=cudnn, found on the H100 captures,
// docs/gpu.md): P = exp2(RN(RN(RN(s scale) - LSE) log2 e)) from the natural LSE (cuDNN's stats), exp2
// the recipe's (MUFU.EX2 with ftz), cast; dS = RN(P (dP - delta)), cast (dK and dQ scaled after).
steps::BackwardElement cudnn_element(std::uint32_t s, std::uint32_t dp, bool visible, float lse, float delta,
                                     float scale, Exp2Kind exp2, const Format& g) {
    const float p = visible && lse != steps::minus_infinity()
                        ? steps::exp2(a::mul(a::sub(a::mul(float_from_bits(s), scale), lse), steps::log2e), exp2)
                        : 0.0f;
    return {p, steps::saturating_cast(p, g), steps::saturating_cast(steps::d_score(p, float_from_bits(dp), delta), g)};
}

// S, P, dP and dS of one tile, as the recipe rounds them.
TileGradients tile_gradients(const FlashContext& ctx, const BackwardModels& models, const HeadOperands& h,
                             const GradOperands& go, Span rows, Span keys, std::vector<float>* p_times_dp = nullptr) {
    const AttentionShape& sh = ctx.shape;
    const Format& g = *ctx.recipe.backward.ds_format;
    const std::uint64_t n = keys.size(), br = rows.size();
    const std::vector<std::uint32_t> vt = detail::transposed(go.dp_v + keys.begin * sh.d_v, n, sh.d_v, {0, sh.d_v});
    std::vector<std::uint32_t> s(br * n, 0), dp(br * n, 0);
    if (h.s != nullptr) {
        for (std::uint64_t r = 0; r < br; ++r)
            std::copy_n(h.s + (rows.begin + r) * sh.n_kv + keys.begin, n,
                        s.begin() + static_cast<std::ptrdiff_t>(r * n));
    } else {
        const std::vector<std::uint32_t> kt = detail::transposed(h.k + keys.begin * sh.d, n, sh.d, {0, sh.d});
        models.score.run(h.q + rows.begin * sh.d, kt.data(), s.data(), s.data(), br, n, sh.d);
    }
    models.grad.run(go.dp_do + rows.begin * sh.d_v, vt.data(), dp.data(), dp.data(), br, n, sh.d_v);
    TileGradients out{std::vector<std::uint32_t>(br * n), std::vector<std::uint32_t>(br * n)};
    const bool compiled = ctx.recipe.softmax.kind == SoftmaxKind::compiled_torch;
    const bool mem_eff = ctx.recipe.backward.schedule == GradSchedule::mem_eff;
    const bool cudnn = ctx.recipe.backward.schedule == GradSchedule::cudnn;
    const std::vector<float> bias = ctx.tile_bias(h.head, rows, keys);  // the forward's
    for (std::uint64_t r = 0; r < br; ++r) {
        const std::uint64_t i = rows.begin + r, visible = ctx.visible(i);
        const float delta = h.delta != nullptr ? h.delta[i] : 0.0f;
        for (std::uint64_t j = 0; j < n; ++j) {
            const std::uint64_t at = r * n + j;
            const bool seen = keys.begin + j < visible;
            // under a soft cap the score is T = capped_score(s), and dS is multiplied by its derivative
            const float t = ctx.softcapped ? capped_score(float_from_bits(s[at]), ctx.softcap) : 0.0f;
            const std::uint32_t score = ctx.softcapped ? bits_of(t) : s[at];
            // under mem-eff a boolean mask's -inf is the kernel's additive bias: P = expf(-inf) = 0
            // (a boolean mask's -inf: P = 0; an additive mask is refused under both, flash_backward)
            const bool kept = seen && (bias.empty() || bias[at] != steps::minus_infinity());
            steps::BackwardElement e =
                mem_eff ? mem_eff_element(s[at], dp[at], kept, h.lse[i], delta, static_cast<float>(sh.scale), g)
                : cudnn ? cudnn_element(s[at], dp[at], kept, h.lse[i], delta, static_cast<float>(sh.scale), ctx.exp2, g)
                : compiled ? torch_compiled::backward_element(score, dp[at], seen, h.lse[i], delta,
                                                              static_cast<float>(sh.scale), g)
                           : steps::backward_element(score, dp[at], seen, h.lse2[i], delta, ctx.scale_log2, ctx.exp2, g,
                                                     ctx.recipe.softmax.exp2_arg, bias.empty() ? 0.0f : bias[at]);
            if (ctx.softcapped) {
                const float ds = a::mul(steps::d_score(e.p, float_from_bits(dp[at]), delta),
                                        capped_score_derivative(t, ctx.softcap));
                e.ds_cast = steps::saturating_cast(ds, g);
            }
            if (p_times_dp != nullptr) (*p_times_dp)[at] = a::mul(e.p, float_from_bits(dp[at]));
            out.p_cast[at] = e.p_cast, out.ds_cast[at] = e.ds_cast;
        }
    }
    return out;
}

// delta of one head's rows: from O (delta_from_o), or rowsum(P * dP) over the tiles in
// forward order.
std::vector<float> deltas(const FlashContext& ctx, const BackwardModels& models, const HeadOperands& h,
                          const GradOperands& go, const AttentionOperands& in, const ForwardResult& fwd,
                          std::uint64_t head, int threads) {
    const AttentionShape& sh = ctx.shape;
    const AttentionRecipe& r = ctx.recipe;
    std::vector<float> delta(sh.n_q, 0);
    if (r.backward.delta != DeltaKind::p_dp) {
        const std::vector<float> all = delta_from_o(ctx, in, fwd);
        return {all.begin() + static_cast<std::ptrdiff_t>(head * sh.n_q),
                all.begin() + static_cast<std::ptrdiff_t>((head + 1) * sh.n_q)};
    }
    const std::vector<Span> row_blocks = blocks_of(sh.n_q, r.tiles.block_m);
    parallel_for(row_blocks.size(), 1, threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t b = begin; b < end; ++b) {
            const Span rows = row_blocks[b];
            for (const Span keys : blocks_of(sh.n_kv, r.tiles.block_n)) {
                if (ctx.tile_masked(rows, keys)) continue;
                std::vector<float> pdp(rows.size() * keys.size());
                tile_gradients(ctx, models, h, go, rows, keys, &pdp);
                for (std::uint64_t row = 0; row < rows.size(); ++row) {
                    for (std::uint64_t j = 0; j < keys.size(); ++j)
                        delta[rows.begin + row] = a::add(delta[rows.begin + row], pdp[row * keys.size() + j]);
                }
            }
        }
    });
    return delta;
}

// x [rows][cols] as [cols][rows].
std::vector<std::uint32_t> transpose(const std::vector<std::uint32_t>& x, std::uint64_t rows, std::uint64_t cols) {
    return detail::transposed(x.data(), rows, cols, {0, cols});
}

// acc += a b (m x n, over k) by the gradient model. Under the compiled softmax the released
// code's einsum gives each bucket's product in the gradient format (BF16) and Inductor adds it to
// the float32 gradient it carries across buckets: the product from zero, cast, then added.
void accumulate(const AttentionRecipe& recipe, const detail::TileProduct& grad, const std::uint32_t* a,
                const std::uint32_t* b, std::vector<std::uint32_t>& acc, std::uint64_t m, std::uint64_t n,
                std::uint64_t k) {
    if (recipe.softmax.kind != SoftmaxKind::compiled_torch) {
        grad.run(a, b, acc.data(), acc.data(), m, n, k);
        return;
    }
    const Format& f = *recipe.backward.grad_format;
    std::vector<std::uint32_t> product(acc.size(), 0);
    grad.run(a, b, product.data(), product.data(), m, n, k);
    for (std::size_t x = 0; x < acc.size(); ++x) {
        const auto cast = static_cast<float>(decode(f, steps::saturating_cast(float_from_bits(product[x]), f)));
        acc[x] = bits_of(a::add(float_from_bits(acc[x]), cast));
    }
}

// Accumulated f32 bits times the scale (1: none), cast to the gradient format.
void write_gradient(const std::vector<std::uint32_t>& acc, float scale, const Format& f, std::uint32_t* out) {
    for (std::size_t i = 0; i < acc.size(); ++i) out[i] = steps::gradient_bits(acc[i], scale, f);
}

// cuDNN's backward engine was captured at D 64 (knob 26: 64 x 64 x 64 tiles) with boolean masks;
// elsewhere cuDNN picks engines, or adds a bias, that no capture shows. Empty where it is modelled.
std::string cudnn_backward_refusal(const AttentionRecipe& r, const AttentionShape& shape) {
    if (shape.d != 64 || shape.d_v != 64)
        return fmt::format(
            "recipe '{}': cuDNN's backward (grad_schedule=cudnn) is modelled at head dimension 64, its "
            "one captured engine (64 x 64 x 64 tiles); at D {} and D_v {} cuDNN picks another, not "
            "modelled",
            r.name, shape.d, shape.d_v);
    if (shape.mask)
        for (const DenseMask& m : shape.mask->dense)
            if (m.has_finite_nonzero())
                return fmt::format(
                    "recipe '{}': cuDNN's backward (grad_schedule=cudnn) is modelled with boolean "
                    "masks (0 and -inf); how it adds an additive bias to P's argument is not captured",
                    r.name);
    return {};
}

// Grouped-query attention: a key-value head's gradient is the sum of its group's query heads'
// (each already in the gradient format), in float32 in head order, cast once: what
// FlashAttention-2's mha_bwd does (at::sum of the expanded dK and dV) and what autograd gives
// PyTorch's enable_gqa (the backward of repeat_interleave sums the group's gradients).
std::vector<std::uint32_t> group_sums(const std::vector<std::uint32_t>& per_head, std::uint64_t heads,
                                      std::uint64_t group, std::uint64_t elements, const Format& f) {
    std::vector<std::uint32_t> out(heads / group * elements);
    for (std::uint64_t kv = 0; kv < heads / group; ++kv) {
        for (std::uint64_t x = 0; x < elements; ++x) {
            float sum = 0;
            for (std::uint64_t h = kv * group; h < (kv + 1) * group; ++h)
                sum = a::add(sum, static_cast<float>(decode(f, per_head[h * elements + x])));
            out[kv * elements + x] = steps::saturating_cast(sum, f);
        }
    }
    return out;
}

}  // namespace

std::string backward_refusal(const AttentionRecipe& recipe) {
    const std::string& name = recipe.name;
    if (recipe.softmax.naive()) return fmt::format("recipe '{}': the backward pass needs an online softmax", name);
    if ((recipe.output.epilogue == Epilogue::cudnn) != (recipe.backward.schedule == GradSchedule::cudnn))
        return fmt::format(
            "recipe '{}': cuDNN's backward (grad_schedule=cudnn) takes its forward's LSE "
            "(epilogue=cudnn), and that forward's backward is cuDNN's",
            name);
    if (recipe.softmax.kind == SoftmaxKind::cuda_math)
        return fmt::format("recipe '{}': PyTorch's math path is modelled forward, its backward (autograd's ops) is not",
                           name);
    if ((recipe.output.epilogue == Epilogue::mem_eff || recipe.scores.scale_log2 == ScaleLog2::scale_first) &&
        recipe.backward.schedule != GradSchedule::mem_eff)
        return fmt::format("recipe '{}': the memory-efficient forward's backward is grad_schedule=mem-eff's", name);
    if (recipe.output.epilogue == Epilogue::fa3)
        return fmt::format("recipe '{}': FlashAttention-3's forward is modelled, its backward is not", name);
    if (recipe.softmax.kind == SoftmaxKind::aten_cpu) {
        if (std::string products = detail::aten_cpu_backward_products(recipe); !products.empty()) return products;
    }
    if (recipe.softmax.kind != SoftmaxKind::aten_cpu && recipe.softmax.kind != SoftmaxKind::aten_cpu_math &&
        (cpu_bf16_gemm(recipe.scores.product) || cpu_bf16_gemm(recipe.p_and_v.product)))
        return fmt::format(
            "recipe '{}': the CPU's BF16 GEMM (amx, avx512-bf16, mkl-avx2) has a backward only as ATen's CPU "
            "kernel runs it (softmax=aten-cpu)",
            name);
    if (recipe.p_and_v.p_quant != nullptr)
        return fmt::format("recipe '{}': the backward of block-quantized P (p_quant) is not modelled", name);
    return {};
}

std::string backward_refusal(const AttentionRecipe& recipe, const AttentionShape& shape) {
    if (std::string why = backward_refusal(recipe); !why.empty()) return why;
    if (recipe.backward.schedule == GradSchedule::cudnn) return cudnn_backward_refusal(recipe, shape);
    if (recipe.softmax.kind == SoftmaxKind::aten_cpu_math)
        return detail::aten_cpu_math_backward_refusal(flash_context(recipe, shape));
    if (recipe.softmax.kind != SoftmaxKind::aten_cpu) return {};
    return detail::aten_cpu_backward_refusal(flash_context(recipe, shape));
}

BackwardResult flash_backward(const AttentionRecipe& recipe, const AttentionShape& shape, const AttentionOperands& in,
                              const ForwardResult& forward, int threads, RunCache* runs, BackwardOutputs outputs) {
    const FlashContext ctx = flash_context(recipe, shape);
    if (shape.query_rows)
        throw Error("a sample of query rows has no backward pass: dK and dV need every row (delta needs only its own)");
    if (const std::string why = backward_refusal(recipe, shape); !why.empty()) throw Error(why);
    if (in.d_o.size() != shape.heads * shape.n_q * shape.d_v)
        throw Error("attention: the backward pass needs a tensor 'do' of shape [.., Nq, Dv]");
    if (recipe.softmax.kind == SoftmaxKind::aten_cpu)  // ATen's own loop (aten_cpu_backward.hpp)
        return detail::aten_cpu_backward(ctx, in, forward, threads);
    if (recipe.softmax.kind == SoftmaxKind::aten_cpu_math)  // autograd's ops (aten_cpu_math_backward.hpp)
        return detail::aten_cpu_math_backward(ctx, in, threads);
    const Format& g = *recipe.backward.ds_format;
    const BackwardModels models{
        detail::TileProduct(recipe, *recipe.target.input, *recipe.target.input, recipe.scores.product),
        detail::TileProduct(recipe, g, g, recipe.backward.product)};
    // Under qk_quant, Q and K as the forward's score product took them, in S and in the gradient
    // products: straight through, the gradients of the quantized Q and K are Q's and K's (what
    // autograd gives a fake-quantized graph).
    const AttentionOperands quantized = recipe.scores.qk_quant != nullptr ? quantized_qk(ctx, in) : AttentionOperands{};
    const AttentionOperands& qk = recipe.scores.qk_quant != nullptr ? quantized : in;
    const std::vector<std::uint32_t> qg = exact_in(qk.q, *recipe.target.input, g, "q (backward)");
    const std::vector<std::uint32_t> kg = exact_in(qk.k, *recipe.target.input, g, "k (backward)");
    const std::vector<std::uint32_t> vg = exact_in(in.v, *recipe.target.input, g, "v (backward)");
    const std::vector<std::uint32_t> dog = exact_in(in.d_o, *recipe.target.input, g, "do (backward)");
    const std::shared_ptr<const std::vector<std::uint32_t>> s =
        runs != nullptr ? runs->scores(recipe, shape, qk, threads) : nullptr;

    BackwardResult out;
    const std::uint64_t group = shape.kv_group;  // dK and dV per query head, then summed over groups
    const bool key_gradients = outputs == BackwardOutputs::all;
    if (outputs != BackwardOutputs::delta) out.dq.assign(in.q.size(), 0);
    if (key_gradients) out.dk.assign(in.k.size() * group, 0), out.dv.assign(in.v.size() * group, 0);
    out.delta.assign(shape.heads * shape.n_q, 0);
    const bool torch_flash = recipe.backward.schedule == GradSchedule::torch_flash;
    const bool mem_eff = recipe.backward.schedule == GradSchedule::mem_eff;
    const bool cudnn = recipe.backward.schedule == GradSchedule::cudnn;
    // The backward's block order follows the kernel's causal mask type; SDPA passes it no window,
    // so none is modelled (its elements would be masked, its blocks ordered as without it). The
    // forward visits every block either way: there a window is a boolean mask.
    if (mem_eff && shape.mask && shape.mask->has_window())
        throw Error(
            fmt::format("recipe '{}': the memory-efficient backward (grad_schedule=mem-eff) takes no "
                        "sliding window (SDPA passes it none); its block order under one is not modelled",
                        recipe.name));
    const MemEffBackwardPlan plan =
        mem_eff ? mem_eff_backward_plan(recipe, launched_heads(shape), shape.n_q, shape.n_kv,
                                        std::max(shape.d, shape.d_v), shape.causal, causal_alignment(shape))
                : MemEffBackwardPlan{};
    const BackwardTiles tiles = torch_flash ? torch_flash_backward_tiles(recipe, shape.d)
                                : mem_eff   ? BackwardTiles{plan.block_i, plan.block_j}
                                : cudnn     ? BackwardTiles{64, 64}
                                            : BackwardTiles{recipe.tiles.block_m, ctx.recipe.tiles.block_n};
    const std::vector<Span> row_blocks = blocks_of(shape.n_q, tiles.block_m);
    const std::vector<Span> key_blocks = blocks_of(shape.n_kv, tiles.block_n);
    // The order a key block visits its row blocks (dK, dV) and a row block its key blocks (dQ):
    // in order, PyTorch's flash backward's row blocks from the last, or the memory-efficient plan's.
    auto rows_of_key_block = [&](std::size_t kb) {
        if (mem_eff) return plan.queries_of_key_block[kb];
        std::vector<std::uint64_t> order(row_blocks.size());
        for (std::size_t step = 0; step < order.size(); ++step)
            order[step] = torch_flash ? row_blocks.size() - 1 - step : step;
        return order;
    };
    auto keys_of_row_block = [&](std::size_t rb) {
        if (mem_eff) return plan.key_blocks_of_query[rb];
        std::vector<std::uint64_t> order(key_blocks.size());
        for (std::size_t kb = 0; kb < order.size(); ++kb) order[kb] = kb;
        return order;
    };
    // the kernels scale dK and dQ at the end; the compiled softmax's and the memory-efficient
    // kernel's dS hold the scale already
    const float dk_dq_scale = recipe.softmax.kind == SoftmaxKind::compiled_torch || mem_eff ? 1.0f : ctx.dk_dq_scale();
    const std::uint64_t d = shape.d, dv = shape.d_v, nq = shape.n_q, nk = shape.n_kv;
    for (std::uint64_t head = 0; head < shape.heads; ++head) {
        const std::uint64_t kv = head / group;
        HeadOperands h{qk.q.data() + head * nq * d,
                       qk.k.data() + kv * nk * d,
                       qg.data() + head * nq * d,
                       kg.data() + kv * nk * d,
                       vg.data() + kv * nk * dv,
                       dog.data() + head * nq * dv,
                       forward.lse_log2.data() + head * nq,
                       nullptr,
                       s ? s->data() + head * nq * nk : nullptr,
                       head,
                       forward.lse.data() + head * nq};
        const GradOperands go = grad_operands(recipe, shape, h);
        const std::vector<float> delta = deltas(ctx, models, h, go, in, forward, head, threads);
        std::copy(delta.begin(), delta.end(), out.delta.begin() + static_cast<std::ptrdiff_t>(head * nq));
        h.delta = delta.data();
        if (outputs == BackwardOutputs::delta) continue;
        std::vector<std::uint32_t> ds(nq * nk, 0);  // dS cast, kept for the dQ pass
        // dK and dV: one KV block per task, over the row blocks in order (dS alone where they
        // are not asked for).
        parallel_for(key_blocks.size(), 1, threads, [&](std::size_t begin, std::size_t end) {
            for (std::size_t kb = begin; kb < end; ++kb) {
                const Span keys = key_blocks[kb];
                std::vector<std::uint32_t> dv_acc(keys.size() * dv, 0), dk_acc(keys.size() * d, 0);
                for (const std::uint64_t rb : rows_of_key_block(kb)) {
                    const Span rows = row_blocks[rb];
                    if (ctx.tile_masked(rows, keys)) continue;
                    const TileGradients t = tile_gradients(ctx, models, h, go, rows, keys);
                    for (std::uint64_t r = 0; r < rows.size(); ++r)
                        std::copy_n(t.ds_cast.begin() + static_cast<std::ptrdiff_t>(r * keys.size()), keys.size(),
                                    ds.begin() + static_cast<std::ptrdiff_t>((rows.begin + r) * nk + keys.begin));
                    if (!key_gradients) continue;
                    // P and dS along the tile's rows, the sum of dV and dK (under grad_quant)
                    const std::uint64_t tile = rb * key_blocks.size() + kb;
                    const bool quantize = recipe.backward.quant != nullptr;
                    const std::vector<std::uint32_t> p =
                        quantize ? grad_quantized(recipe, t.p_cast.data(), rows.size(), keys.size(), -2,
                                                  grad_rounding(recipe, head, 5, tile), "P")
                                 : std::vector<std::uint32_t>{};
                    const std::vector<std::uint32_t> dsr =
                        quantize ? grad_quantized(recipe, t.ds_cast.data(), rows.size(), keys.size(), -2,
                                                  grad_rounding(recipe, head, 6, tile), "dS (for dK)")
                                 : std::vector<std::uint32_t>{};
                    const std::vector<std::uint32_t> pt = transpose(quantize ? p : t.p_cast, rows.size(), keys.size());
                    const std::vector<std::uint32_t> dst =
                        transpose(quantize ? dsr : t.ds_cast, rows.size(), keys.size());
                    accumulate(recipe, models.grad, pt.data(), go.dv_do + rows.begin * dv, dv_acc, keys.size(), dv,
                               rows.size());
                    accumulate(recipe, models.grad, dst.data(), go.dk_q + rows.begin * d, dk_acc, keys.size(), d,
                               rows.size());
                }
                if (!key_gradients) continue;
                write_gradient(dv_acc, 1.0f, *recipe.backward.grad_format,
                               out.dv.data() + (head * nk + keys.begin) * dv);
                write_gradient(dk_acc, dk_dq_scale, *recipe.backward.grad_format,
                               out.dk.data() + (head * nk + keys.begin) * d);
            }
        });
        // dQ: one row block per task, over the KV blocks in order.
        parallel_for(row_blocks.size(), 1, threads, [&](std::size_t begin, std::size_t end) {
            for (std::size_t rb = begin; rb < end; ++rb) {
                const Span rows = row_blocks[rb];
                std::vector<std::uint32_t> dq_acc(rows.size() * d, 0);
                for (const std::uint64_t kb : keys_of_row_block(rb)) {
                    const Span keys = key_blocks[kb];
                    if (ctx.tile_masked(rows, keys)) continue;
                    std::vector<std::uint32_t> tile(rows.size() * keys.size());
                    for (std::uint64_t r = 0; r < rows.size(); ++r)
                        std::copy_n(ds.begin() + static_cast<std::ptrdiff_t>((rows.begin + r) * nk + keys.begin),
                                    keys.size(), tile.begin() + static_cast<std::ptrdiff_t>(r * keys.size()));
                    // dS along the tile's keys, the sum of dQ (under grad_quant)
                    if (recipe.backward.quant != nullptr)
                        tile =
                            grad_quantized(recipe, tile.data(), rows.size(), keys.size(), -1,
                                           grad_rounding(recipe, head, 7, rb * key_blocks.size() + kb), "dS (for dQ)");
                    if (!torch_flash) {
                        accumulate(recipe, models.grad, tile.data(), go.dq_k + keys.begin * d, dq_acc, rows.size(), d,
                                   keys.size());
                        continue;
                    }
                    // each key block's dQ from zero in registers, then added to the buffer (atomicAdd)
                    std::vector<std::uint32_t> part(dq_acc.size(), 0);
                    models.grad.run(tile.data(), go.dq_k + keys.begin * d, part.data(), part.data(), rows.size(), d,
                                    keys.size());
                    for (std::size_t x = 0; x < part.size(); ++x)
                        dq_acc[x] = bits_of(a::add(float_from_bits(dq_acc[x]), float_from_bits(part[x])));
                }
                write_gradient(dq_acc, dk_dq_scale, *recipe.backward.grad_format,
                               out.dq.data() + (head * nq + rows.begin) * d);
            }
        });
    }
    if (group > 1 && key_gradients) {
        out.dk = group_sums(out.dk, shape.heads, group, nk * d, *recipe.backward.grad_format);
        out.dv = group_sums(out.dv, shape.heads, group, nk * dv, *recipe.backward.grad_format);
    }
    return out;
}

}  // namespace roundscope::emu
