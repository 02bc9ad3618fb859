#include "analysis/headroom.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/inputs/head_inputs.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/error.hpp"
#include "lib/parallel.hpp"

namespace roundscope::analysis {
namespace {

// The recipe whose softmax (and P, O, inputs where the format allows) is in `f`.
emu::AttentionRecipe softmax_in(const emu::Format& f, emu::SoftmaxKind kind) {
    emu::AttentionRecipe r = emu::find_recipe("fa2-bf16");
    r.name = std::string("headroom-") + std::string(f.name);
    r.softmax.kind = kind;
    r.softmax.format = &f;
    if (f == emu::f16) r.target.input = r.p_and_v.p_format = r.output.format = &emu::f16;  // an FP16 model end to end
    return r;
}

// Rows (over all heads) with a NaN or Inf in O, and rows of zeros that should not be: a key with
// a non-zero V row (nonzero_v[head][key]) is among the keys they see.
struct BadRows {
    std::uint64_t nonfinite = 0, zero = 0;
};
BadRows bad_rows(const emu::ForwardResult& f, const emu::Format& o_format, const emu::AttentionShape& sh,
                 const std::vector<std::vector<char>>& nonzero_v) {
    BadRows bad;
    const std::uint64_t d_v = sh.d_v;
    for (std::size_t i = 0; i * d_v < f.o.size(); ++i) {
        bool finite = true, zero = true;
        for (std::uint64_t c = 0; c < d_v; ++c) {
            const double x = emu::decode(o_format, f.o[i * d_v + c]);
            finite = finite && std::isfinite(x), zero = zero && x == 0;
        }
        const std::uint64_t head = i / sh.n_q, row = i % sh.n_q;
        bad.nonfinite += finite ? 0 : 1;
        if (!zero) continue;
        const std::uint64_t keys = emu::visible_keys(sh, row);
        bool sees_nonzero = false;
        for (std::uint64_t j = 0; j < keys && !sees_nonzero; ++j)
            sees_nonzero = nonzero_v[head][j] && emu::key_visible(sh, head, row, j);
        bad.zero += sees_nonzero ? 1 : 0;
    }
    return bad;
}

// Whether each key's V row is not all zero, head by head.
std::vector<std::vector<char>> nonzero_v_rows(const emu::AttentionInputs& in, const emu::AttentionShape& sh) {
    const std::vector<double> v = emu::decode_tensor<double>(in.v);
    std::vector<std::vector<char>> nonzero(sh.heads, std::vector<char>(sh.n_kv, 0));
    for (std::uint64_t h = 0; h < sh.heads; ++h)
        for (std::uint64_t j = 0; j < sh.n_kv; ++j)
            for (std::uint64_t c = 0; c < sh.d_v; ++c)
                if (v[(h * sh.n_kv + j) * sh.d_v + c] != 0) nonzero[h][j] = 1;
    return nonzero;
}

}  // namespace

HeadroomResult headroom(const emu::AttentionInputs& given, const HeadroomOptions& o) {
    // k and v indexed by query head (the truth cache knows the inputs by their address: kept)
    const emu::AttentionInputs expanded =
        emu::kv_group(given) > 1 ? emu::kv_per_query_head(given) : emu::AttentionInputs{};
    const emu::AttentionInputs& in = emu::kv_group(given) > 1 ? expanded : given;
    const emu::AttentionShape sh = emu::attention_shape_of(in, o.causal, o.softmax_scale);
    emu::attention_operands(in, emu::f32, false);  // every input finite (an Error naming it), emulated or not
    const std::vector<double> q = emu::decode_tensor<double>(in.q), k = emu::decode_tensor<double>(in.k);
    HeadroomResult r;
    r.rows.resize(sh.heads * sh.n_q);
    parallel_for(r.rows.size(), 16, o.threads, [&](std::size_t begin, std::size_t end) {
        std::vector<double> s(sh.n_kv);
        for (std::size_t x = begin; x < end; ++x) {
            const std::uint64_t head = x / sh.n_q, i = x % sh.n_q;
            const std::uint64_t keys = emu::visible_keys(sh, i);
            double m = -std::numeric_limits<double>::infinity();
            for (std::uint64_t j = 0; j < keys; ++j) {
                const double mask = emu::key_mask(sh, head, i, j);  // -inf: masked
                s[j] = mask;
                if (mask == -std::numeric_limits<double>::infinity()) continue;
                double dot = 0;
                for (std::uint64_t c = 0; c < sh.d; ++c)
                    dot += q[(head * sh.n_q + i) * sh.d + c] * k[(head * sh.n_kv + j) * sh.d + c];
                s[j] = dot * static_cast<double>(sh.scale);
                if (sh.softcap != 0) s[j] = sh.softcap * std::tanh(s[j] / sh.softcap);  // capped, then masked
                s[j] += mask;
                m = std::max(m, s[j]);
            }
            double sum = 0;
            for (std::uint64_t j = 0; j < keys; ++j) sum += std::exp(s[j] - m);
            const bool none = m == -std::numeric_limits<double>::infinity();
            r.rows[x] = {head, i, m, none ? m : m + std::log(sum)};
        }
    });
    std::vector<std::vector<char>> nonzero_v;  // decoded once, where a format is emulated
    for (const emu::Format* f : {&emu::f32, &emu::f16, &emu::bf16}) {
        FormatHeadroom h{std::string(f->name),
                         std::log(emu::decode(*f, emu::max_finite_bits(*f))),
                         0,
                         0,
                         0,
                         std::numeric_limits<double>::infinity(),
                         std::nullopt,
                         std::nullopt,
                         std::nullopt,
                         std::nullopt,
                         std::nullopt,
                         std::nullopt};
        for (const RowHeadroom& row : r.rows) {
            if (row.max_score > h.ln_max) ++h.naive_exp_overflow_rows;
            if (row.lse > h.ln_max) ++h.naive_sum_overflow_rows;
            if (row.lse - row.max_score > h.ln_max) ++h.shifted_overflow_rows;
            h.min_naive_margin = std::min(h.min_naive_margin, h.ln_max - row.lse);
        }
        r.formats.push_back(h);
        if (!(h.min_naive_margin < o.emulate_within)) continue;

        emu::ForwardOptions fo;
        fo.threads = o.threads, fo.runs = o.runs;
        for (const auto kind : {emu::SoftmaxKind::naive_unshifted, emu::SoftmaxKind::naive, emu::SoftmaxKind::online}) {
            if (sh.softcap != 0 && kind != emu::SoftmaxKind::online) {  // the non-fused kernels take no cap
                r.note = "under a soft cap the naive softmaxes are not emulated (their kernels take none)";
                continue;
            }
            const emu::AttentionRecipe recipe = softmax_in(*f, kind);
            const emu::ForwardResult out =
                emu::flash_forward(recipe, sh, emu::attention_operands(in, *recipe.target.input, false), fo);
            if (nonzero_v.empty()) nonzero_v = nonzero_v_rows(in, sh);
            const BadRows bad = bad_rows(out, *recipe.output.format, sh, nonzero_v);
            FormatHeadroom& e = r.formats.back();
            const bool naive = kind == emu::SoftmaxKind::naive_unshifted, shifted = kind == emu::SoftmaxKind::naive;
            (naive     ? e.emulated_naive_nonfinite_rows
             : shifted ? e.emulated_shifted_nonfinite_rows
                       : e.emulated_online_nonfinite_rows) = bad.nonfinite;
            (naive     ? e.emulated_naive_zero_rows
             : shifted ? e.emulated_shifted_zero_rows
                       : e.emulated_online_zero_rows) = bad.zero;
        }
    }
    return r;
}

}  // namespace roundscope::analysis
