#include "emu/attention/flash/aten_cpu_math_backward.hpp"

#include <fmt/format.h>

#include <vector>

#include "emu/attention/flash/aten_cpu_backward.hpp"
#include "emu/attention/flash/aten_cpu_math_forward.hpp"
#include "emu/attention/flash/math_path_operands.hpp"
#include "emu/attention/flash/tile_product.hpp"
#include "emu/attention/math/aten_cpu_math.hpp"
#include "emu/numbers/f32_arith.hpp"
#include "emu/numbers/round.hpp"
#include "lib/bits.hpp"
#include "lib/parallel.hpp"

namespace roundscope::emu::detail {
namespace {

namespace a = f32_arith;

constexpr float minus_inf = -__builtin_huge_valf();

// float32 bits of x times the factor, rounded (the scalar multiply's backward)
std::vector<float> scaled(const std::vector<std::uint32_t>& x, float factor) {
    std::vector<float> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = a::mul(float_from_bits(x[i]), factor);
    return out;
}

// float32 values cast to the gradient's format (the upcast's backward)
void cast_into(const std::vector<float>& x, const Format& to, std::uint32_t* out) {
    for (std::size_t i = 0; i < x.size(); ++i)
        out[i] = static_cast<std::uint32_t>(cast_from_f32(x[i], to, CastOptions{}));
}

struct HeadGrads {
    const std::uint32_t *q, *k, *v, *d_o;
    std::uint32_t* dq;
    std::vector<float>&dk, &dv;  // float32: a group's heads add to them before the cast
    float* delta;
    std::uint64_t head;
};

void head_backward(const FlashContext& ctx, const HeadGrads& h) {
    const AttentionRecipe& r = ctx.recipe;
    const AttentionShape& sh = ctx.shape;
    const Format& in = *r.target.input;
    const Format& grad = *r.backward.grad_format;
    const std::uint64_t nq = sh.n_q, nk = sh.n_kv, d = sh.d, dv = sh.d_v;
    const float root = math_path_root_scale(sh);
    const std::vector<std::uint32_t> qs = math_path_scaled(h.q, nq * d, in, root),
                                     ks = math_path_scaled(h.k, nk * d, in, root),
                                     vs = math_path_scaled(h.v, nk * dv, in, 1.0f),
                                     dos = math_path_scaled(h.d_o, nq * dv, in, 1.0f);
    const TileProduct score(r, f32, f32, r.scores.product), pv(r, f32, f32, r.p_and_v.product);
    // the forward's P (autograd keeps the softmax's result)
    std::vector<std::uint32_t> s(nq * nk), p(nq * nk, 0);
    score.run(qs.data(), transposed(ks.data(), nk, d, {0, d}).data(), nullptr, s.data(), nq, nk, d);
    const std::vector<float> mask = ctx.tile_mask(h.head, {0, nq}, {0, nk});  // empty: none
    std::vector<float> x(nk), row(nk);
    for (std::uint64_t i = 0; i < nq; ++i) {
        const std::uint64_t visible = ctx.visible(i);
        for (std::uint64_t j = 0; j < nk; ++j)
            x[j] = j >= visible ? minus_inf
                                : a::add(float_from_bits(s[i * nk + j]), mask.empty() ? 0.0f : mask[i * nk + j]);
        float m = 0, l = 0;
        if (aten_cpu_math_softmax(x, nk, row, m, l))
            for (std::uint64_t j = 0; j < nk; ++j) p[i * nk + j] = bits_of(row[j]);
    }
    // dV = P^T dO; dP = dO V^T
    std::vector<std::uint32_t> dv32(nk * dv), dp(nq * nk), ds(nq * nk);
    pv.run(transposed(p.data(), nq, nk, {0, nk}).data(), dos.data(), nullptr, dv32.data(), nk, dv, nq);
    pv.run(dos.data(), transposed(vs.data(), nk, dv, {0, dv}).data(), nullptr, dp.data(), nq, nk, dv);
    // dS = (dP - sum(dP P)) P, the sum as map2_reduce_all forms it (reduce_all_sum of the products)
    std::vector<float> prod(nk);
    for (std::uint64_t i = 0; i < nq; ++i) {
        for (std::uint64_t j = 0; j < nk; ++j)
            prod[j] = a::mul(float_from_bits(dp[i * nk + j]), float_from_bits(p[i * nk + j]));
        const float dot = aten_cpu::reduce_all_sum(prod.data(), nk);
        h.delta[i] = dot;
        for (std::uint64_t j = 0; j < nk; ++j)
            ds[i * nk + j] =
                bits_of(a::mul(a::sub(float_from_bits(dp[i * nk + j]), dot), float_from_bits(p[i * nk + j])));
    }
    // dQ = dS ks, dK = dS^T qs (the GEMMs of S's backward), each times the root
    std::vector<std::uint32_t> dqs(nq * d), dks(nk * d);
    score.run(ds.data(), ks.data(), nullptr, dqs.data(), nq, d, nk);
    score.run(transposed(ds.data(), nq, nk, {0, nk}).data(), qs.data(), nullptr, dks.data(), nk, d, nq);
    cast_into(scaled(dqs, root), grad, h.dq);
    h.dk = scaled(dks, root);
    h.dv = scaled(dv32, 1.0f);
}

}  // namespace

std::string aten_cpu_math_backward_refusal(const FlashContext& ctx) {
    const AttentionRecipe& r = ctx.recipe;
    const AttentionShape& s = ctx.shape;
    const std::string why = fmt::format("recipe '{}': the CPU math path's backward is modelled ", r.name);
    if (s.d < 12) return why + fmt::format("for D of at least 12 (here {}): dQ's SGEMM would run another kernel", s.d);
    if (!(*r.backward.ds_format == f32) || !(*r.backward.grad_format == *r.target.input))
        return why +
               "with dS in float32 and the gradients in the input's format (ds_format f32, grad_format "
               "the input's)";
    if (!backward_keys_unset(r))
        return why + "as autograd runs it: its products and order are the forward's (leave the backward's keys unset)";
    return {};
}

BackwardResult aten_cpu_math_backward(const FlashContext& ctx, const AttentionOperands& in, int threads) {
    const AttentionShape& s = ctx.shape;
    const std::uint64_t nq = s.n_q, nk = s.n_kv, d = s.d, dv = s.d_v;
    BackwardResult out;
    out.dq.assign(in.q.size(), 0), out.dk.assign(in.k.size(), 0), out.dv.assign(in.v.size(), 0);
    out.delta.assign(s.heads * nq, 0.0f);
    // Grouped heads: the math path repeats the upcast K and V over a group, so autograd adds a
    // group's float32 dK and dV in head order, then casts once (found by probe: docs/torch-cpu.md);
    // threads over key-value heads give the same bits on any count.
    const std::uint64_t group = s.kv_group;
    const Format& grad = *ctx.recipe.backward.grad_format;
    parallel_for(s.heads / group, 1, threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t kv = begin; kv < end; ++kv) {
            std::vector<float> dk_sum, dv_sum, dk_head, dv_head;
            for (std::uint64_t head = kv * group; head < (kv + 1) * group; ++head) {
                head_backward(
                    ctx, HeadGrads{in.q.data() + head * nq * d, in.k.data() + kv * nk * d, in.v.data() + kv * nk * dv,
                                   in.d_o.data() + head * nq * dv, out.dq.data() + head * nq * d, dk_head, dv_head,
                                   out.delta.data() + head * nq, head});
                if (head == kv * group) {
                    dk_sum = dk_head, dv_sum = dv_head;
                    continue;
                }
                for (std::size_t i = 0; i < dk_sum.size(); ++i) dk_sum[i] = a::add(dk_sum[i], dk_head[i]);
                for (std::size_t i = 0; i < dv_sum.size(); ++i) dv_sum[i] = a::add(dv_sum[i], dv_head[i]);
            }
            cast_into(dk_sum, grad, out.dk.data() + kv * nk * d);
            cast_into(dv_sum, grad, out.dv.data() + kv * nk * dv);
        }
    });
    return out;
}

}  // namespace roundscope::emu::detail
