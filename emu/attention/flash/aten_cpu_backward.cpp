#include "emu/attention/flash/aten_cpu_backward.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "emu/attention/flash/aten_gemv.hpp"
#include "emu/attention/flash/tile_product.hpp"
#include "emu/attention/math/inductor_cpu_math.hpp"
#include "emu/mma/amx_gemm.hpp"
#include "emu/mma/aten_blas_gemm.hpp"
#include "emu/mma/mkl_avx2_gemm.hpp"
#include "emu/numbers/f32_arith.hpp"
#include "emu/numbers/round.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/bits.hpp"
#include "lib/parallel.hpp"

namespace roundscope::emu::detail {
namespace {

namespace a = f32_arith;

// A value of the input's format (its bits, one per uint32) as float32 and back, rounded to nearest.
std::uint32_t to_input(const Format& in, float x) {
    return static_cast<std::uint32_t>(cast_from_f32(x, in, CastOptions{}));
}

float from_input(const Format& in, std::uint32_t bits) { return static_cast<float>(decode(in, bits)); }

// grad (BF16 bits) += RN(acc x scale), in float32, rounded back to BF16: the brgemm's source
// scale (skipped at 1) and sum post-op on a BF16 destination.
void add_into_bf16(std::uint32_t* grad, const std::vector<std::uint32_t>& acc, float scale) {
    for (std::size_t x = 0; x < acc.size(); ++x) {
        const float product = scale == 1.0f ? float_from_bits(acc[x]) : a::mul(float_from_bits(acc[x]), scale);
        grad[x] = to_input(bf16, a::add(product, from_input(bf16, grad[x])));
    }
}

struct HeadGrads {
    const std::uint32_t *q, *k, *v, *d_o, *o;
    const float* lse;
    std::uint32_t *dq, *dk, *dv;
    float* delta;
    std::uint64_t head, d;
};

// dV += P^T dO, dK += scale dS^T Q and dQ += scale dS K for one block (P and dS [rows][keys] as
// ATen multiplies them: BF16 or FP16, or float32), by the GEMM cpublas::gemm runs for the format
void add_gradients(const Format& in, const HeadGrads& h, Span rows, Span keys, const std::vector<std::uint32_t>& p,
                   const std::vector<std::uint32_t>& ds, float scale) {
    const std::uint64_t nr = rows.size(), nn = keys.size(), d = h.d, m = rows.begin, n = keys.begin;
    const std::vector<std::uint32_t> pt = transposed(p.data(), nr, nn, {0, nn}),
                                     dst = transposed(ds.data(), nr, nn, {0, nn});
    if (in == f32) {
        // MKL's SGEMM with beta = 1 into the float32 gradients; alpha (the scale) on MKL's A
        // operand, Q for dK and K for dQ (b here)
        mkl_avx2_gemm(in, pt.data(), h.d_o + m * d, h.dv + n * d, h.dv + n * d, nn, d, nr);
        mkl_avx2_gemm(in, dst.data(), h.q + m * d, h.dk + n * d, h.dk + n * d, nn, d, nr, scale);
        mkl_avx2_gemm(in, ds.data(), h.k + n * d, h.dq + m * d, h.dq + m * d, nr, d, nn, scale);
    } else if (in == f16) {
        // ATen's own GEMM: no FP16 GEMM of oneDNN's or MKL's takes an FP16 destination here
        aten_blas_gemm_axpy_add(in, pt.data(), h.d_o + m * d, h.dv + n * d, nn, d, nr, 1.0f);
        aten_blas_gemm_axpy_add(in, dst.data(), h.q + m * d, h.dk + n * d, nn, d, nr, scale);
        aten_blas_gemm_dot_add(in, ds.data(), h.k + n * d, h.dq + m * d, nr, d, nn, scale);
    } else {
        std::vector<std::uint32_t> acc(nn * d), acc_q(nr * d);
        avx512_bf16_brgemm(pt.data(), h.d_o + m * d, acc.data(), nn, d, nr);  // dV: P^T dO
        add_into_bf16(h.dv + n * d, acc, 1.0f);
        avx512_bf16_brgemm(dst.data(), h.q + m * d, acc.data(), nn, d, nr);  // dK: dS^T Q
        add_into_bf16(h.dk + n * d, acc, scale);
        avx512_bf16_brgemm(ds.data(), h.k + n * d, acc_q.data(), nr, d, nn);  // dQ: dS K
        add_into_bf16(h.dq + m * d, acc_q, scale);
    }
}

void head_backward(const FlashContext& ctx, const HeadGrads& h) {
    const AttentionShape& s = ctx.shape;
    const Format& in = *ctx.recipe.target.input;
    const bool is_f32 = in == f32;  // float32: no reduced copies of P and dS, the gradients by SGEMM
    const std::uint64_t nq = s.n_q, nk = s.n_kv, d = s.d;
    const float scale = s.scale;
    std::vector<float> prod(d);
    // delta: map2_reduce_all, a vector of 16 floats per step (two from each BF16 or FP16 vector of
    // 32), then the tree
    for (std::uint64_t r = 0; r < nq; ++r) {
        for (std::uint64_t c = 0; c < d; ++c)
            prod[c] = a::mul(from_input(in, h.d_o[r * d + c]), from_input(in, h.o[r * d + c]));
        h.delta[r] = inductor::lane_sum(prod.data(), d, is_f32 ? 16 : 32, 16);
    }
    const std::uint64_t q_block = aten_query_block(nq);
    const auto kv_block = static_cast<std::uint64_t>(ctx.recipe.tiles.block_n);  // ATen's kvSplitSize, 512
    for (std::uint64_t m = 0; m < nq; m += q_block) {
        const Span rows{m, std::min(nq, m + q_block)};
        const std::uint64_t nr = rows.size();
        const std::uint64_t num_keys = s.causal ? std::min(rows.end, nk) : nk;  // ATen's top-left causal
        for (std::uint64_t n = 0; n < num_keys; n += kv_block) {
            const Span keys{n, std::min(nk, n + kv_block)};
            const std::uint64_t nn = keys.size();
            std::vector<std::uint32_t> score(nr * nn), dp(nr * nn);
            const std::vector<std::uint32_t> kt = transposed(h.k + n * d, nn, d, {0, d}),
                                             vt = transposed(h.v + n * d, nn, d, {0, d});
            // S = scale Q K^T: MKL's GEMM with alpha = scale, applied after the chain by its AVX-512
            // kernel (below), to K before it by its AVX2 kernel on an AMD CPU
            const bool amd = ctx.recipe.scores.product == Product::mkl_avx2;
            if (amd) {
                mkl_avx2_gemm(in, h.q + m * d, kt.data(), nullptr, score.data(), nr, nn, d, scale);
                mkl_avx2_gemm(in, h.d_o + m * d, vt.data(), nullptr, dp.data(), nr, nn, d);
            } else {
                avx512_bf16_gemm(h.q + m * d, kt.data(), nullptr, score.data(), nr, nn, d);
                avx512_bf16_gemm(h.d_o + m * d, vt.data(), nullptr, dp.data(), nr, nn, d);
            }
            const std::vector<float> mask = ctx.tile_mask(h.head, rows, keys);  // empty: none
            // P and dS in float32 bits, and (BF16 and FP16) rounded to the input's format
            std::vector<std::uint32_t> p(nr * nn), ds(nr * nn), p_in(nr * nn), ds_in(nr * nn);
            for (std::uint64_t r = 0; r < nr; ++r) {
                const std::uint64_t visible = ctx.visible(m + r);
                for (std::uint64_t j = 0; j < nn; ++j) {
                    const std::uint64_t x = r * nn + j;
                    float sc = amd ? float_from_bits(score[x]) : a::mul(float_from_bits(score[x]), scale);
                    if (!mask.empty()) sc = a::add(sc, mask[x]);
                    const float px = n + j >= visible ? 0.0f : inductor::expf(a::sub(sc, h.lse[m + r]));
                    const float dsx = a::mul(px, a::sub(float_from_bits(dp[x]), h.delta[m + r]));
                    p[x] = bits_of(px), ds[x] = bits_of(dsx);
                    if (!is_f32) p_in[x] = to_input(in, px), ds_in[x] = to_input(in, dsx);
                }
            }
            add_gradients(in, h, rows, keys, is_f32 ? p : p_in, is_f32 ? ds : ds_in, scale);
        }
    }
}

}  // namespace

bool backward_keys_unset(const AttentionRecipe& r) {
    const BackwardStage plain;
    return r.backward.product == plain.product && r.backward.delta == plain.delta &&
           *r.backward.delta_format == *plain.delta_format && r.backward.delta_sum == plain.delta_sum &&
           r.backward.schedule == plain.schedule && r.backward.quant == nullptr && !r.backward.stochastic;
}

std::string aten_cpu_backward_products(const AttentionRecipe& r) {
    const Product s = r.scores.product, pv = r.p_and_v.product;
    if (s == pv && (s == Product::avx512_bf16 || s == Product::mkl_avx2)) return {};
    return fmt::format(
        "recipe '{}': ATen's CPU backward is modelled with the products of Intel's AVX512-BF16 "
        "(score_product=avx512-bf16, pv_product=avx512-bf16) or of an AMD CPU (both mkl-avx2), untested on AMX",
        r.name);
}

std::string aten_cpu_backward_refusal(const FlashContext& ctx) {
    const AttentionRecipe& r = ctx.recipe;
    const AttentionShape& s = ctx.shape;
    const std::string why = fmt::format("recipe '{}': ATen's CPU backward is modelled ", r.name);
    if (std::string products = aten_cpu_backward_products(r); !products.empty()) return products;
    const Format& in = *r.target.input;
    if (!(in == bf16 || ((in == f32 || in == f16) && r.scores.product == Product::mkl_avx2)) ||
        !(*r.output.format == in) || !(*r.backward.grad_format == in) || !(*r.backward.ds_format == in))
        return why +
               "for BF16 inputs (FP16 and float32 with an AMD CPU's products, mkl-avx2), with o_format, "
               "ds_format and grad_format the input's";
    if (!backward_keys_unset(r))
        return why + "as ATen runs it: its products, delta and order are its own (leave the backward's keys unset)";
    if (s.d != s.d_v || s.d < 32 || s.d > 384)
        return why + fmt::format("for D from 32 to 384 (here {}): other lengths take paths not probed", s.d);
    if (aten_one_row_block(s))
        return why + "where no query block is one row (its GEMMs run as a GEMV, not probed backward)";
    if (aten_one_key_block(r, s))
        return why + "where no KV block is one key (its GEMMs run as a GEMV, not probed backward)";
    if (s.causal && causal_alignment(s) != Alignment::top_left)
        return why + "under ATen's causal mask, which is top-left (causal_alignment top-left)";
    return {};
}

BackwardResult aten_cpu_backward(const FlashContext& ctx, const AttentionOperands& in, const ForwardResult& forward,
                                 int threads) {
    const AttentionShape& s = ctx.shape;
    const std::uint64_t nq = s.n_q, nk = s.n_kv, d = s.d;
    BackwardResult out;
    out.dq.assign(in.q.size(), 0), out.dk.assign(in.k.size(), 0), out.dv.assign(in.v.size(), 0);
    out.delta.assign(s.heads * nq, 0.0f);
    // Grouped heads: ATen's loop takes a key-value head's query heads in order, each adding to the
    // same BF16 dK and dV, block after block (found by probe: docs/torch-cpu.md); key-value heads
    // are independent, so threads over them give the same bits on any count.
    const std::uint64_t group = s.kv_group;
    parallel_for(s.heads / group, 1, threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t kv = begin; kv < end; ++kv)
            for (std::uint64_t head = kv * group; head < (kv + 1) * group; ++head) {
                const HeadGrads h{in.q.data() + head * nq * d,
                                  in.k.data() + kv * nk * d,
                                  in.v.data() + kv * nk * d,
                                  in.d_o.data() + head * nq * d,
                                  forward.o.data() + head * nq * d,
                                  forward.lse.data() + head * nq,
                                  out.dq.data() + head * nq * d,
                                  out.dk.data() + kv * nk * d,
                                  out.dv.data() + kv * nk * d,
                                  out.delta.data() + head * nq,
                                  head,
                                  d};
                head_backward(ctx, h);
            }
    });
    return out;
}

}  // namespace roundscope::emu::detail
