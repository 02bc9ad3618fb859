// The forward pass of the flash-attention emulator (flash_attention.hpp): online softmax tile
// by tile, or the naive softmax over whole rows.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "emu/attention/flash/aten_cpu_math_forward.hpp"
#include "emu/attention/flash/aten_gemv.hpp"
#include "emu/attention/flash/cuda_math_forward.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_context.hpp"
#include "emu/attention/flash/flash_split_kv.hpp"
#include "emu/attention/flash/run_cache.hpp"
#include "emu/attention/flash/tile_product.hpp"
#include "emu/attention/math/libdevice_math.hpp"
#include "emu/attention/softmax/aten_cpu_softmax.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/attention/softmax/compiled_torch_softmax.hpp"
#include "emu/mma/onednn_gemv.hpp"
#include "lib/error.hpp"
#include "lib/parallel.hpp"

namespace roundscope::emu {
namespace {

namespace a = f32_arith;

struct ForwardModels {
    detail::TileProduct score, pv;
};

// One head's operands and V as the PV product sees it.
struct HeadView {
    const std::uint32_t *q, *k, *v, *v_quantized;
    const std::uint32_t* s;  // the head's S [n_q][n_kv] from a RunCache, or null
};

// A row block's running state and its counts.
struct RowBlock {
    Span rows;
    std::vector<steps::OnlineRowState> state;
    std::vector<steps::RowTies> ties;
    std::vector<std::uint32_t> acc;     // f32 bits [rows][d_v]
    std::vector<float> l_reloaded;      // compiled-torch: l updated from its BF16-stored value
    std::vector<ForwardCounts> counts;  // row by row
    RowBlock(Span r, std::uint64_t d_v, std::uint64_t skip_keys)
        : rows(r),
          state(r.size()),
          ties(r.size()),
          acc(r.size() * d_v, 0),
          l_reloaded(r.size(), 0.0f),
          counts(r.size(), ForwardCounts{.skip_keys = skip_keys}) {}
};

// P times V for the keys of one tile, into acc: one product with V as quantized, or, under the
// diagonal fix, two: the keys of complete past V blocks with quantized V, then the keys of the
// row's own (diagonal) block with V unquantized.
// Under pv_depth=tile, a partial tile's P V over the whole block_n: P and V padded with zeros
// (the recipe's check refuses it with the diagonal fix).
bool pv_over_whole_tile(const FlashContext& ctx, const detail::TileProduct& mma, const HeadView& h, Span rows,
                        Span keys, const std::vector<std::uint32_t>& p, std::vector<std::uint32_t>& acc) {
    // (the recipe's check keeps pv_depth=tile to the online softmax, whose products always add C)
    const auto width = static_cast<std::uint64_t>(resolved_block_n(ctx.recipe, ctx.shape.d));
    if (ctx.recipe.p_and_v.depth != PvDepth::tile || keys.size() >= width) return false;
    const std::uint64_t dv = ctx.shape.d_v;
    std::vector<std::uint32_t> p_wide(rows.size() * width, 0), v_wide(width * dv, 0);
    for (std::uint64_t r = 0; r < rows.size(); ++r)
        std::copy_n(p.begin() + static_cast<std::ptrdiff_t>(r * keys.size()), keys.size(),
                    p_wide.begin() + static_cast<std::ptrdiff_t>(r * width));
    const std::uint32_t* v = (h.v_quantized != nullptr ? h.v_quantized : h.v) + keys.begin * dv;
    std::copy_n(v, keys.size() * dv, v_wide.begin());
    mma.run(p_wide.data(), v_wide.data(), acc.data(), acc.data(), rows.size(), dv, width);
    return true;
}

// Without C (ATen's first KV block: a GEMM with beta 0), acc's first product starts from nothing.
void pv_product(const FlashContext& ctx, const detail::TileProduct& mma, const HeadView& h, Span rows, Span keys,
                const std::vector<std::uint32_t>& p, std::vector<std::uint32_t>& acc, bool without_c = false) {
    if (pv_over_whole_tile(ctx, mma, h, rows, keys, p, acc)) return;
    const std::uint64_t dv = ctx.shape.d_v;
    const std::uint32_t* v_past = (h.v_quantized != nullptr ? h.v_quantized : h.v) + keys.begin * dv;
    const std::uint32_t* c = without_c ? nullptr : acc.data();
    if (h.v_quantized == nullptr || !ctx.recipe.p_and_v.diagonal_fix) {
        // a row alone in ATen's query block: the BLAS's GEMV (aten_gemv.hpp), from the C it was given
        const std::vector<std::uint64_t> gemv = detail::aten_gemv_pv_rows(ctx.recipe, ctx.shape, rows);
        std::vector<std::uint32_t> c_rows;
        for (const std::uint64_t r : gemv)
            c_rows.insert(c_rows.end(), acc.begin() + r * dv, acc.begin() + (r + 1) * dv);
        mma.run(p.data(), v_past, c, acc.data(), rows.size(), dv, keys.size());
        for (std::size_t i = 0; i < gemv.size(); ++i)
            avx512_bf16_gemv_rows(p.data() + gemv[i] * keys.size(), v_past, without_c ? nullptr : &c_rows[i * dv],
                                  acc.data() + gemv[i] * dv, keys.size(), dv);
        return;
    }
    std::vector<std::uint32_t> past(p.size(), 0), diagonal(p.size(), 0);
    for (std::uint64_t r = 0; r < rows.size(); ++r) {
        for (std::uint64_t j = 0; j < keys.size(); ++j) {
            auto& to = ctx.diagonal_key(rows.begin + r, keys.begin + j) ? diagonal : past;
            to[r * keys.size() + j] = p[r * keys.size() + j];
        }
    }
    mma.run(past.data(), v_past, c, acc.data(), rows.size(), dv, keys.size());
    mma.run(diagonal.data(), h.v + keys.begin * dv, acc.data(), acc.data(), rows.size(), dv, keys.size());
}

// S for one tile: [rows][keys] f32 bits.
std::vector<std::uint32_t> score_tile(const FlashContext& ctx, const detail::TileProduct& mma, const HeadView& h,
                                      Span rows, Span keys) {
    const std::uint64_t d = ctx.shape.d;
    if (h.s != nullptr) {
        std::vector<std::uint32_t> s(rows.size() * keys.size());
        for (std::uint64_t r = 0; r < rows.size(); ++r)
            std::copy_n(h.s + (rows.begin + r) * ctx.shape.n_kv + keys.begin, keys.size(),
                        s.begin() + static_cast<std::ptrdiff_t>(r * keys.size()));
        return s;
    }
    const std::vector<std::uint32_t> kt =
        detail::transposed(h.k + keys.begin * d, keys.size(), d, {0, d});  // [d][keys]
    std::vector<std::uint32_t> s(rows.size() * keys.size(), 0);
    mma.run(h.q + rows.begin * d, kt.data(), nullptr, s.data(), rows.size(), keys.size(), d);
    detail::aten_gemv_scores(ctx.recipe, ctx.shape, h.q + rows.begin * d, h.k, rows, keys, s);
    return s;
}

// One KV block of ATen's CPU flash attention for a row block (aten_cpu_softmax.hpp): O times
// the factor, then P V added chunk by chunk, except on the first block, whose GEMM has no C.
void aten_cpu_tile(const FlashContext& ctx, const ForwardModels& models, const HeadView& h, std::uint64_t head,
                   RowBlock& b, Span keys) {
    const std::uint64_t n = keys.size(), dv = ctx.shape.d_v;
    const std::vector<std::uint32_t> s = score_tile(ctx, models.score, h, b.rows, keys);
    const std::vector<float> mask = ctx.tile_mask(head, b.rows, keys);  // empty: none
    std::vector<std::uint32_t> p_cast(b.rows.size() * n);
    for (std::uint64_t row = 0; row < b.rows.size(); ++row) {
        const std::uint64_t visible = ctx.visible(b.rows.begin + row);
        const int in_tile = visible <= keys.begin ? 0 : static_cast<int>(std::min(visible - keys.begin, n));
        const float factor =
            aten_cpu::row_step(static_cast<float>(ctx.shape.scale), *ctx.recipe.p_and_v.p_format, s.data() + row * n,
                               static_cast<int>(n), in_tile, mask.empty() ? nullptr : mask.data() + row * n,
                               b.state[row], p_cast.data() + row * n, &b.counts[row], keys.begin, &b.ties[row]);
        for (std::uint64_t c = 0; c < dv; ++c)
            b.acc[row * dv + c] = bits_of(a::mul(float_from_bits(b.acc[row * dv + c]), factor));
    }
    pv_product(ctx, models.pv, h, b.rows, keys, p_cast, b.acc, keys.begin == 0);  // ATen's beta: 0 on block 0
}

// One KV tile of the online softmax for a row block (the row step is the kernels' own, or
// under online-torch that of PyTorch tensor ops, whose every result is stored in its format).
void online_tile(const FlashContext& ctx, const ForwardModels& models, const HeadView& h, std::uint64_t head,
                 RowBlock& b, Span keys) {
    if (ctx.recipe.softmax.kind == SoftmaxKind::aten_cpu) {
        aten_cpu_tile(ctx, models, h, head, b, keys);
        return;
    }
    const std::uint64_t n = keys.size(), dv = ctx.shape.d_v;
    const bool compiled = ctx.recipe.softmax.kind == SoftmaxKind::compiled_torch;
    const bool torch = compiled || ctx.recipe.softmax.kind == SoftmaxKind::online_torch;
    const Format& running = *ctx.recipe.output.accumulator;
    std::vector<std::uint32_t> s = score_tile(ctx, models.score, h, b.rows, keys);
    if (ctx.softcapped)
        for (std::uint32_t& x : s) x = bits_of(capped_score(float_from_bits(x), ctx.softcap));
    if (ctx.score_prescale != 0)  // scale_log2=scale-first: S scale rounded, before the softmax's RN(log2 e)
        for (std::uint32_t& x : s) x = bits_of(a::mul(float_from_bits(x), ctx.score_prescale));
    const std::vector<float> bias = ctx.tile_bias(head, b.rows, keys);  // empty: none (the torch steps take none)
    std::vector<std::uint32_t> p_cast(b.rows.size() * n);
    for (std::uint64_t row = 0; row < b.rows.size(); ++row) {
        const std::uint64_t visible = ctx.visible(b.rows.begin + row);
        const int in_tile = visible <= keys.begin ? 0 : static_cast<int>(std::min(visible - keys.begin, n));
        const std::uint32_t* scores = s.data() + row * n;
        std::uint32_t* p = p_cast.data() + row * n;
        const int width = static_cast<int>(n);
        const float factor =
            compiled ? torch_compiled::row_step(ctx.torch, scores, width, in_tile, b.state[row], b.l_reloaded[row], p,
                                                &b.counts[row], keys.begin, &b.ties[row])
            : torch  ? torch_eager::row_step(ctx.torch, scores, width, in_tile, b.state[row], p, &b.counts[row],
                                             keys.begin, &b.ties[row])
                     : steps::online_row_step(ctx.softmax, scores, width, in_tile, b.state[row], p, &b.counts[row],
                                              keys.begin, &b.ties[row], bias.empty() ? nullptr : bias.data() + row * n);
        for (std::uint64_t c = 0; c < dv; ++c) {  // compiled: O carried in float32 (never stored)
            const float rescaled = a::mul(float_from_bits(b.acc[row * dv + c]), factor);
            b.acc[row * dv + c] = bits_of(torch && !compiled ? torch_eager::stored(rescaled, running) : rescaled);
        }
    }
    // P * S, left in float32 by the row steps, quantized along the tile's keys (blocks of 32
    // from the tile's first key, a multiple of 32; masked keys' zeros never set a scale)
    if (ctx.recipe.p_and_v.p_quant != nullptr)
        p_cast = block_fake_quantized(p_cast, f32, {b.rows.size(), n}, -1, *ctx.recipe.p_and_v.p_quant, 32,
                                      *ctx.recipe.p_and_v.p_format, "quantized P");
    if (torch) {  // O.mul_(factor).add_(P V): P V stored (einsum), the sum in float32, stored (eager)
        std::vector<std::uint32_t> pv(b.acc.size(), 0);
        pv_product(ctx, models.pv, h, b.rows, keys, p_cast, pv);
        for (std::size_t x = 0; x < pv.size(); ++x) {
            const float sum = a::add(float_from_bits(b.acc[x]), torch_eager::stored(float_from_bits(pv[x]), running));
            b.acc[x] = bits_of(compiled ? sum : torch_eager::stored(sum, running));
        }
        return;
    }
    if (running == f32) {
        pv_product(ctx, models.pv, h, b.rows, keys, p_cast, b.acc);
        return;
    }
    // O = round(round(O r) + round(P V)) in the running format (each operation exact in double,
    // then rounded once: the format's own correctly rounded operation).
    std::vector<std::uint32_t> pv(b.acc.size(), 0);
    pv_product(ctx, models.pv, h, b.rows, keys, p_cast, pv);
    for (std::size_t x = 0; x < pv.size(); ++x) {
        const double sum = rounded_value(static_cast<double>(float_from_bits(b.acc[x])), running) +
                           rounded_value(static_cast<double>(float_from_bits(pv[x])), running);
        b.acc[x] = bits_of(static_cast<float>(rounded_value(sum, running)));
    }
}

// Row i of O: the accumulated row times `factor`, in float32 and cast to the O format.
void write_output_row(const FlashContext& ctx, const std::uint32_t* acc, float factor, std::uint64_t i,
                      ForwardResult& out) {
    const std::uint64_t dv = ctx.shape.d_v;
    for (std::uint64_t c = 0; c < dv; ++c) {
        const float o = a::mul(float_from_bits(acc[c]), factor);
        out.o_f32[i * dv + c] = o;
        out.o[i * dv + c] = steps::saturating_cast(o, *ctx.recipe.output.format);
    }
}

// Under online-torch: O.div_(l) in float32, stored in the O format; LSE = ln l + m (float32), the
// log SLEEF's under compiled-torch, whose division reads l as the row block's form says.
void finish_torch_row(const FlashContext& ctx, const std::uint32_t* acc, const steps::OnlineRowState& st, float divisor,
                      std::uint64_t i, ForwardResult& out) {
    const std::uint64_t dv = ctx.shape.d_v;
    for (std::uint64_t c = 0; c < dv; ++c) {
        const float o = st.l == 0.0f ? 0.0f : a::div(float_from_bits(acc[c]), divisor);
        out.o_f32[i * dv + c] = o;
        out.o[i * dv + c] = static_cast<std::uint32_t>(cast_from_f32(o, *ctx.recipe.output.format, CastOptions{}));
    }
    const bool compiled = ctx.recipe.softmax.kind == SoftmaxKind::compiled_torch;
    const float log_l = compiled ? inductor::logf(st.l, ctx.torch.lanes) : std::log(st.l);
    out.lse[i] = st.l == 0.0f ? steps::minus_infinity() : a::add(log_l, st.m);
    out.lse_log2[i] = a::mul(out.lse[i], steps::log2e);
}

// PyTorch's flash epilogue (normalize_softmax_lse): O = acc RN(1/l), with 1/l taken as 1 when l
// is 0 or NaN; LSE = fma(m, scale, logf(l)) from the raw max, +inf for an empty row (-inf in a
// split's pass, whose O_accum is o_f32).
void finish_torch_flash_row(const FlashContext& ctx, const std::uint32_t* acc, const steps::OnlineRowState& st,
                            std::uint64_t i, ForwardResult& out) {
    const bool empty = st.l == 0.0f || st.l != st.l;
    write_output_row(ctx, acc, empty ? 1.0f : a::div(1.0f, st.l), i, out);
    const float empty_lse = ctx.split_pass ? -__builtin_huge_valf() : __builtin_huge_valf();
    out.lse[i] = empty ? empty_lse : a::fma(st.m_raw, static_cast<float>(ctx.shape.scale), cuda_logf(st.l));
    out.lse_log2[i] = a::mul(out.lse[i], steps::log2e);
}

// FlashAttention-3's epilogue (hopper/softmax.h, finalize, built with --use_fast_math): 1 / l by
// MUFU.RCP (rcp.approx.ftz), 0 when l is 0 or NaN, so an empty row's O is 0; l 2^-k (exact: the
// max offset's 2^k taken out) for the LSE, fma(m, RN(c RN(ln 2)), __logf(l 2^-k)) from the raw max,
// __logf = RN(lg2.approx.ftz RN(ln 2)) under fast math and fused as PyTorch's FlashAttention-2
// build fuses the same expression (docs/findings.md says what of this is read from source only).
void finish_fa3_row(const FlashContext& ctx, const std::uint32_t* acc, const steps::OnlineRowState& st, std::uint64_t i,
                    ForwardResult& out) {
    const bool empty = st.l == 0.0f || st.l != st.l;
    write_output_row(ctx, acc, empty ? 0.0f : mufu_rcp_ftz(st.l), i, out);
    const float l = steps::offset_free_sum(st.l, ctx.recipe.softmax.max_offset);
    const float log_l = a::mul(detail::mufu_lg2_ftz(l), steps::ln2);
    out.lse[i] = empty ? steps::minus_infinity() : a::fma(st.m_raw, a::mul(ctx.scale_log2, steps::ln2), log_l);
    out.lse_log2[i] = a::mul(out.lse[i], steps::log2e);
}

// cuDNN's SDPA on sm_90 (measured on the H100 captures, docs/gpu.md): O = RN(acc
// rcp.approx.ftz(l)) as FlashAttention-3's; LSE = fma(RN(m c), RN(ln 2), RN(lg2.approx.ftz(l)
// RN(ln 2))) from the scaled max. l >= 1 in every captured row, where lg2's ftz form and
// __logf's agree; an empty row (O 0, LSE -inf, as FlashAttention-3's) was never captured.
void finish_cudnn_row(const FlashContext& ctx, const std::uint32_t* acc, const steps::OnlineRowState& st,
                      std::uint64_t i, ForwardResult& out) {
    const bool empty = st.l == 0.0f || st.l != st.l;
    write_output_row(ctx, acc, empty ? 0.0f : mufu_rcp_ftz(st.l), i, out);
    const float log_l = a::mul(detail::mufu_lg2_ftz(st.l), steps::ln2);
    out.lse[i] = empty ? steps::minus_infinity() : a::fma(st.m, steps::ln2, log_l);
    out.lse_log2[i] = a::mul(out.lse[i], steps::log2e);
}

// PyTorch's memory-efficient epilogue (kernel_forward.h, epilogue_rescale_output.h): O = acc RN(1 /
// l), 1/l taken as 1 when l is 0 (a NaN l stays NaN); LSE = RN(RN(m / RN(log2 e)) + logf(l)) from
// the scaled max m, logf libdevice's; an empty row's LSE is -inf (-inf / log2 e + logf(0)).
void finish_mem_eff_row(const FlashContext& ctx, const std::uint32_t* acc, const steps::OnlineRowState& st,
                        std::uint64_t i, ForwardResult& out) {
    write_output_row(ctx, acc, a::div(1.0f, st.l == 0.0f ? 1.0f : st.l), i, out);
    out.lse[i] = a::add(a::div(st.m, steps::log2e), libdevice_logf(st.l));
    out.lse_log2[i] = a::mul(out.lse[i], steps::log2e);
}

// O, LSE and the counts of a finished row block (the `block_index`th) into the result.
void finish_block(const FlashContext& ctx, const RowBlock& b, std::uint64_t block_index, std::uint64_t head,
                  ForwardResult& out) {
    const AttentionRecipe& r = ctx.recipe;
    const auto form = r.softmax.kind == SoftmaxKind::compiled_torch
                          ? torch_compiled::division_form(ctx.kv_buckets(), block_index)
                          : torch_compiled::Division::never;
    for (std::uint64_t row = 0; row < b.rows.size(); ++row) {
        const std::uint64_t i = head * ctx.shape.n_q + b.rows.begin + row;
        if (r.softmax.kind == SoftmaxKind::online_torch) {
            finish_torch_row(ctx, b.acc.data() + row * ctx.shape.d_v, b.state[row], b.state[row].l, i, out);
            continue;
        }
        if (r.softmax.kind == SoftmaxKind::compiled_torch) {
            const float divisor = torch_compiled::division_sum(form, ctx.torch, b.state[row].l, b.l_reloaded[row]);
            finish_torch_row(ctx, b.acc.data() + row * ctx.shape.d_v, b.state[row], divisor, i, out);
            continue;
        }
        if (r.softmax.kind == SoftmaxKind::aten_cpu) {
            const aten_cpu::RowEnd end = aten_cpu::row_end(b.state[row]);
            write_output_row(ctx, b.acc.data() + row * ctx.shape.d_v, end.reciprocal, i, out);
            out.lse[i] = end.lse;
            out.lse_log2[i] = a::mul(end.lse, steps::log2e);
            continue;
        }
        if (r.output.epilogue == Epilogue::torch_flash) {
            finish_torch_flash_row(ctx, b.acc.data() + row * ctx.shape.d_v, b.state[row], i, out);
            continue;
        }
        if (r.output.epilogue == Epilogue::fa3) {
            finish_fa3_row(ctx, b.acc.data() + row * ctx.shape.d_v, b.state[row], i, out);
            continue;
        }
        if (r.output.epilogue == Epilogue::cudnn) {
            finish_cudnn_row(ctx, b.acc.data() + row * ctx.shape.d_v, b.state[row], i, out);
            continue;
        }
        if (r.output.epilogue == Epilogue::mem_eff) {
            finish_mem_eff_row(ctx, b.acc.data() + row * ctx.shape.d_v, b.state[row], i, out);
            continue;
        }
        write_output_row(ctx, b.acc.data() + row * ctx.shape.d_v,
                         steps::output_factor(b.state[row].l, r.p_and_v.p_scale), i, out);
        out.lse_log2[i] = steps::lse_log2(b.state[row].m, steps::offset_free_sum(b.state[row].l, r.softmax.max_offset));
        out.lse[i] = a::mul(out.lse_log2[i], steps::ln2);
    }
}

// The online softmax over `rows` of one row block. Which tiles run is the whole block's choice
// (a tile a row does not see still passes through its state when another row of the block
// sees it), so a subset of the rows gets the bits the whole block gives them.
void online_row_block(const FlashContext& ctx, const ForwardModels& models, const HeadView& h, std::uint64_t head,
                      Span block, Span rows, ForwardResult& out, std::uint64_t skip_keys) {
    RowBlock b(rows, ctx.shape.d_v, skip_keys);
    const bool every_tile = ctx.recipe.softmax.kind == SoftmaxKind::online_torch ||
                            ctx.recipe.softmax.kind == SoftmaxKind::compiled_torch;  // as the released code does
    for (const Span keys : blocks_of(ctx.shape.n_kv, ctx.recipe.tiles.block_n, ctx.recipe.tiles.kv_order)) {
        if (ctx.tile_masked(block, keys) && !every_tile) continue;
        if (keys.begin < ctx.split_keys.begin || keys.begin >= ctx.split_keys.end) continue;  // another split's
        online_tile(ctx, models, h, head, b, keys);
    }
    finish_block(ctx, b, block.begin / static_cast<std::uint64_t>(ctx.recipe.tiles.block_m), head, out);
    for (std::uint64_t row = 0; row < rows.size(); ++row) {
        if (b.state[row].true_max_count >= 2) ++b.counts[row].repeated_max_rows;
        steps::count_ties(b.ties[row], b.counts[row]);
        out.row_counts[head * ctx.shape.n_q + rows.begin + row] = b.counts[row];
    }
}

// The naive softmax over one row block: arithmetic in softmax_format (each operation exact in
// double, then rounded once, which equals the format's own correctly rounded operation).
void naive_row_block(const FlashContext& ctx, const ForwardModels& models, const HeadView& h, std::uint64_t head,
                     Span rows, ForwardResult& out, std::uint64_t skip_keys) {
    const AttentionRecipe& r = ctx.recipe;
    const Format& f = *r.softmax.format;
    // P V runs over the keys up to the last one a row of the block sees where P's zeros past
    // them leave the product's accumulator as it is (the tensor-core models, float64 sums):
    // the same bits, and half the work under a causal mask.
    std::uint64_t nk = ctx.shape.n_kv;
    if (models.pv.zero_products_change_nothing()) {
        nk = 0;
        for (std::uint64_t row = rows.begin; row < rows.end; ++row) nk = std::max(nk, ctx.visible(row));
    }
    auto round = [&](double x) { return rounded_value(x, f); };
    const Format& sum_format = r.softmax.stored_row_sum();
    std::vector<std::uint32_t> s(rows.size() * nk, 0);
    for (const Span keys : blocks_of(ctx.shape.n_kv, r.tiles.block_n)) {
        if (keys.begin >= nk || ctx.tile_masked(rows, keys)) continue;  // scores no row reads
        const std::vector<std::uint32_t> tile = score_tile(ctx, models.score, h, rows, keys);
        const std::uint64_t kept = std::min(keys.end, nk) - keys.begin;
        for (std::uint64_t row = 0; row < rows.size(); ++row)
            std::copy_n(tile.begin() + static_cast<std::ptrdiff_t>(row * keys.size()), kept,
                        s.begin() + static_cast<std::ptrdiff_t>(row * nk + keys.begin));
    }
    RowBlock b(rows, ctx.shape.d_v, skip_keys);
    std::vector<std::uint32_t> p_cast(rows.size() * nk, 0);
    std::vector<double> x(nk);
    const steps::PCastConstants k(r.p_and_v.p_scale, *r.p_and_v.p_format);
    // A dense mask's value b (natural units, rounded to float32) is added to the scaled score in
    // the softmax's format, x = RN(RN(s scale) + b); -inf masks the key.
    const std::vector<float> bias = ctx.tile_bias(head, rows, {0, nk});
    std::vector<char> seen(nk);
    for (std::uint64_t row = 0; row < rows.size(); ++row) {
        const std::uint64_t visible = ctx.visible(rows.begin + row);
        double m = -std::numeric_limits<double>::infinity();
        bool any = false;
        for (std::uint64_t j = 0; j < visible; ++j) {
            const float b2 = bias.empty() ? 0.0f : bias[row * nk + j];  // exp2's units
            seen[j] = b2 != steps::minus_infinity();
            if (!seen[j]) continue;
            x[j] = round(static_cast<double>(float_from_bits(s[row * nk + j])) * static_cast<double>(ctx.shape.scale));
            if (b2 != 0.0f) {
                const double added = ctx.shape.mask->dense_at(head, query_position(ctx.shape, rows.begin + row), j);
                x[j] = round(x[j] + static_cast<double>(static_cast<float>(added)));
            }
            m = std::max(m, x[j]);
            any = true;
        }
        const double shift = r.softmax.kind == SoftmaxKind::naive && any ? m : 0.0;
        double l = 0;
        for (std::uint64_t j = 0; j < visible; ++j) {
            if (!seen[j]) continue;
            const float y = static_cast<float>(round(x[j] - shift));
            x[j] = round(static_cast<double>(steps::exp2(a::mul(y, steps::log2e), ctx.exp2)));  // e_j
            l = rounded_value(l + x[j], sum_format);
        }
        for (std::uint64_t j = 0; j < visible; ++j) {
            if (!seen[j]) continue;
            const auto p = static_cast<float>(round(x[j] / l));
            p_cast[row * nk + j] = steps::cast_p(p, r.p_and_v.p_scale, *r.p_and_v.p_format);
            steps::count_p(p, r.p_and_v.p_scale, p_cast[row * nk + j], *r.p_and_v.p_format, j, b.counts[row], k);
        }
        // LSE = ln l + shift, from log2 as the online softmax forms it.
        const float lse2 =
            !any ? steps::minus_infinity()
                 : a::add(a::mul(static_cast<float>(shift), steps::log2e), soft_log2(static_cast<float>(l)));
        const std::uint64_t i = head * ctx.shape.n_q + rows.begin + row;
        out.lse_log2[i] = lse2;
        out.lse[i] = a::mul(lse2, steps::ln2);
    }
    pv_product(ctx, models.pv, h, rows, {0, nk}, p_cast, b.acc);
    const float factor = a::div(1.0f, r.p_and_v.p_scale);  // O = P V / S
    for (std::uint64_t row = 0; row < rows.size(); ++row)
        write_output_row(ctx, b.acc.data() + row * ctx.shape.d_v, factor, head * ctx.shape.n_q + rows.begin + row, out);
    std::copy(b.counts.begin(), b.counts.end(),
              out.row_counts.begin() + static_cast<std::ptrdiff_t>(head * ctx.shape.n_q + rows.begin));
}

void check_sizes(const AttentionShape& s, const AttentionOperands& in, bool backward) {
    auto check = [](const std::vector<std::uint32_t>& x, std::uint64_t want, const char* name) {
        if (x.size() != want)
            throw Error(
                fmt::format("attention: tensor '{}' has {} elements, the shape needs {}", name, x.size(), want));
    };
    check(in.q, s.heads * s.n_q * s.d, "q");
    if (s.kv_group == 0 || s.heads % s.kv_group != 0)
        throw Error(fmt::format("attention: {} heads do not form groups of {}", s.heads, s.kv_group));
    check(in.k, s.heads / s.kv_group * s.n_kv * s.d, "k");
    check(in.v, s.heads / s.kv_group * s.n_kv * s.d_v, "v");
    if (backward) check(in.d_o, s.heads * s.n_q * s.d_v, "do");
}

ForwardResult run_forward(const FlashContext& ctx, const AttentionOperands& given, const ForwardOptions& options);

// A split-KV forward: each split's pass, then the combine. PyTorch's (split_kv_sms) runs its split
// kernel's tiles; a fixed split (kv_splits) the recipe's.
ForwardResult run_split_forward(const FlashContext& ctx, const AttentionOperands& in, const ForwardOptions& options) {
    FlashContext split = ctx;
    if (ctx.recipe.tiles.split_kv_sms > 0) {
        const SplitKvTiles tiles = split_kv_tiles(ctx.shape.d);
        split.recipe.tiles.block_m = tiles.block_m, split.recipe.tiles.block_n = tiles.block_n;
    }
    split.split_pass = true;
    std::vector<ForwardResult> passes;
    for (int s = 0; s < ctx.splits; ++s) {
        split.split_keys = split_keys(ctx.shape.n_kv, split.recipe.tiles.block_n, ctx.splits, s);
        passes.push_back(run_forward(split, in, options));
    }
    return combine_splits(ctx, passes);
}

ForwardResult run_forward(const FlashContext& ctx, const AttentionOperands& given, const ForwardOptions& options) {
    if (ctx.splits > 1 && !ctx.split_pass) return run_split_forward(ctx, given, options);
    const AttentionRecipe& recipe = ctx.recipe;
    // Q and K as the score product takes them (block-quantized under qk_quant); a run cache then
    // keys its scores by these bits
    const AttentionOperands quantized =
        recipe.scores.qk_quant != nullptr ? quantized_qk(ctx, given) : AttentionOperands{};
    const AttentionOperands& in = recipe.scores.qk_quant != nullptr ? quantized : given;
    const AttentionShape& shape = ctx.shape;
    const ForwardModels models{
        detail::TileProduct(recipe, *recipe.target.input, *recipe.target.input, recipe.scores.product, ctx.aten_packed),
        detail::TileProduct(recipe, *recipe.p_and_v.p_format, *recipe.target.input, recipe.p_and_v.product,
                            ctx.aten_packed)};
    const std::vector<std::uint32_t> v_quantized = quantized_v(ctx, in.v);
    // (the math path's S is of q and k scaled first: the cache's S, of the inputs, is not it)
    const bool math =
        recipe.softmax.kind == SoftmaxKind::cuda_math || recipe.softmax.kind == SoftmaxKind::aten_cpu_math;
    const std::shared_ptr<const std::vector<std::uint32_t>> scores =
        options.runs != nullptr && !math ? options.runs->scores(recipe, shape, in, options.threads) : nullptr;

    ForwardResult out;
    out.o.assign(shape.heads * shape.n_q * shape.d_v, 0);
    out.o_f32.assign(out.o.size(), 0);
    out.lse.assign(shape.heads * shape.n_q, 0);
    out.lse_log2.assign(out.lse.size(), 0);
    out.row_counts.assign(out.lse.size(), ForwardCounts{.skip_keys = options.uncounted_keys});
    const std::vector<Span> row_blocks = blocks_of(shape.n_q, recipe.tiles.block_m);
    parallel_for(shape.heads * row_blocks.size(), 1, options.threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t task = begin; task < end; ++task) {
            const std::uint64_t head = task / row_blocks.size();
            const Span block = row_blocks[task % row_blocks.size()];
            const Span rows{std::max(block.begin, options.row_begin), std::min(block.end, options.row_end)};
            if (rows.begin >= rows.end) continue;
            const std::uint64_t kv = head / shape.kv_group;
            const HeadView h{in.q.data() + head * shape.n_q * shape.d, in.k.data() + kv * shape.n_kv * shape.d,
                             in.v.data() + kv * shape.n_kv * shape.d_v,
                             v_quantized.empty() ? nullptr : v_quantized.data() + kv * shape.n_kv * shape.d_v,
                             scores ? scores->data() + head * shape.n_q * shape.n_kv : nullptr};
            if (recipe.softmax.kind == SoftmaxKind::aten_cpu_math)
                detail::aten_cpu_math_rows(ctx, h.q, h.k, h.v, head, rows, out, options.uncounted_keys);
            else if (math)
                detail::cuda_math_rows(ctx, h.q, h.k, h.v, head, rows, out, options.uncounted_keys);
            else if (!recipe.softmax.naive())
                online_row_block(ctx, models, h, head, block, rows, out, options.uncounted_keys);
            else
                naive_row_block(ctx, models, h, head, rows, out, options.uncounted_keys);
        }
    });
    sum_row_counts(out, shape.heads, shape.n_q, static_cast<std::uint64_t>(recipe.tiles.block_m));
    return out;
}

}  // namespace

void sum_row_counts(ForwardResult& out, std::uint64_t heads, std::uint64_t n_q, std::uint64_t block_m) {
    out.counts = ForwardCounts{};
    out.head_counts.assign(heads, ForwardCounts{});
    for (std::uint64_t head = 0; head < heads; ++head)
        for (const Span block : blocks_of(n_q, block_m)) {
            ForwardCounts sum;
            for (std::uint64_t row = block.begin; row < block.end; ++row)
                steps::add_counts(sum, out.row_counts[head * n_q + row]);
            steps::add_counts(out.counts, sum);
            steps::add_counts(out.head_counts[head], sum);
        }
}

ForwardResult flash_forward(const AttentionRecipe& recipe, const AttentionShape& shape, const AttentionOperands& in,
                            const ForwardOptions& options) {
    const FlashContext ctx = flash_context(recipe, shape);
    check_sizes(shape, in, false);
    if (options.runs != nullptr)
        if (const std::shared_ptr<const ForwardResult> kept =
                options.runs->forward(recipe, shape, in, options, static_cast<std::uint64_t>(ctx.recipe.tiles.block_m)))
            return *kept;
    ForwardResult out = run_forward(ctx, in, options);
    if (options.runs != nullptr) options.runs->keep_forward(recipe, shape, in, options, out);
    return out;
}

}  // namespace roundscope::emu
