#include "analysis/leak.hpp"

#include <algorithm>
#include <cmath>

#include "emu/attention/attention_operands.hpp"
#include "emu/attention/flash_attention.hpp"
#include "emu/numbers/unpack.hpp"

namespace roundscope::analysis {
namespace {

// The first `tokens` tokens of every head of an [h][n][width] tensor.
std::vector<std::uint32_t> prefix(const std::vector<std::uint32_t>& x, std::uint64_t heads, std::uint64_t n,
                                  std::uint64_t width, std::uint64_t tokens) {
    std::vector<std::uint32_t> out;
    out.reserve(heads * tokens * width);
    for (std::uint64_t h = 0; h < heads; ++h)
        out.insert(out.end(), x.begin() + static_cast<std::ptrdiff_t>(h * n * width),
                   x.begin() + static_cast<std::ptrdiff_t>((h * n + tokens) * width));
    return out;
}

// Token j of every head scaled by 16 (exact in any binary format short of overflow): it then
// holds its block's largest magnitude and moves the block's shared scale.
void enlarge_token(std::vector<std::uint32_t>& x, const emu::Format& f, std::uint64_t heads, std::uint64_t n,
                   std::uint64_t width, std::uint64_t j) {
    for (std::uint64_t h = 0; h < heads; ++h) {
        for (std::uint64_t c = 0; c < width; ++c) {
            std::uint32_t& e = x[(h * n + j) * width + c];
            e = static_cast<std::uint32_t>(emu::cast_from_f64(16 * emu::decode(f, e), f, emu::CastOptions{}));
        }
    }
}

double max_abs_difference(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b,
                          const emu::Format& f, std::uint64_t begin, std::uint64_t end) {
    double m = 0;
    for (std::uint64_t x = begin; x < end; ++x) m = std::max(m, std::fabs(emu::decode(f, a[x]) - emu::decode(f, b[x])));
    return m;
}

}  // namespace

LeakResult leak(const emu::AttentionInputs& in, const LeakOptions& o) {
    emu::AttentionRecipe r = o.recipe;
    r.v_quant = o.format, r.v_block = o.block, r.diagonal_fix = o.fix;
    emu::AttentionShape full = emu::attention_shape_of(in, true, o.softmax_scale);
    const emu::AttentionOperands all = emu::attention_operands(in, *r.input, false);
    const std::uint64_t n = std::min<std::uint64_t>({full.n_q, full.n_kv, o.max_tokens}), heads = full.heads,
                        d = full.d, dv = full.d_v;
    emu::AttentionShape sh = full;
    sh.n_q = sh.n_kv = n;
    emu::AttentionOperands x;
    x.q = prefix(all.q, heads, full.n_q, d, n), x.k = prefix(all.k, heads, full.n_kv, d, n),
    x.v = prefix(all.v, heads, full.n_kv, dv, n);
    const emu::Format& of = *r.o_format;
    emu::ForwardOptions fo;
    fo.threads = o.threads;
    const emu::ForwardResult base = emu::flash_forward(r, sh, x, fo);
    LeakResult result;
    result.tokens = n;
    result.future_influence_by_position.assign(n, 0.0), result.parallel_vs_autoregressive_by_position.assign(n, 0.0);
    const auto block = static_cast<std::uint64_t>(o.block);

    // Pairs (i, j), j > i in i's V block: enlarge V[j], recompute the rows of its block before j.
    for (std::uint64_t j = 1; j < n; ++j) {
        const std::uint64_t first = j / block * block;
        if (first == j) continue;
        emu::AttentionOperands changed = x;
        enlarge_token(changed.v, *r.input, heads, n, dv, j);
        emu::ForwardOptions rows = fo;
        rows.row_begin = first, rows.row_end = j;
        const emu::ForwardResult f = emu::flash_forward(r, sh, changed, rows);
        for (std::uint64_t h = 0; h < heads; ++h) {
            for (std::uint64_t i = first; i < j; ++i) {
                const std::uint64_t at = (h * n + i) * dv;
                if (!std::equal(base.o.begin() + static_cast<std::ptrdiff_t>(at),
                                base.o.begin() + static_cast<std::ptrdiff_t>(at + dv),
                                f.o.begin() + static_cast<std::ptrdiff_t>(at)))
                    ++result.leaking_pairs;
                double& influence = result.future_influence_by_position[i];
                influence = std::max(influence, max_abs_difference(base.o, f.o, of, at, at + dv));
                result.max_future_influence = std::max(result.max_future_influence, influence);
            }
        }
    }

    // Parallel against autoregressive: query i with tokens 0..i only (its partial V block then
    // quantized zero-padded).
    for (std::uint64_t i = 0; i < n; ++i) {
        emu::AttentionShape one = sh;
        one.n_q = 1, one.n_kv = i + 1;
        emu::AttentionOperands p;
        for (std::uint64_t h = 0; h < heads; ++h) {
            p.q.insert(p.q.end(), x.q.begin() + static_cast<std::ptrdiff_t>((h * n + i) * d),
                       x.q.begin() + static_cast<std::ptrdiff_t>((h * n + i + 1) * d));
            p.k.insert(p.k.end(), x.k.begin() + static_cast<std::ptrdiff_t>(h * n * d),
                       x.k.begin() + static_cast<std::ptrdiff_t>((h * n + i + 1) * d));
            p.v.insert(p.v.end(), x.v.begin() + static_cast<std::ptrdiff_t>(h * n * dv),
                       x.v.begin() + static_cast<std::ptrdiff_t>((h * n + i + 1) * dv));
        }
        const emu::ForwardResult ar = emu::flash_forward(r, one, p, fo);
        for (std::uint64_t h = 0; h < heads; ++h) {
            for (std::uint64_t c = 0; c < dv; ++c) {
                const double diff =
                    std::fabs(emu::decode(of, ar.o[h * dv + c]) - emu::decode(of, base.o[(h * n + i) * dv + c]));
                double& at_i = result.parallel_vs_autoregressive_by_position[i];
                at_i = std::max(at_i, diff);
                result.parallel_vs_autoregressive_max_abs_diff =
                    std::max(result.parallel_vs_autoregressive_max_abs_diff, diff);
            }
        }
    }

    // Masking: every key and value from a block boundary on replaced; the rows before it must
    // not move (their V blocks are untouched, so only a masked key leaking through the softmax
    // or a cast could move them).
    const std::uint64_t cut = n / 2 / block * block;
    if (cut > 0) {
        emu::AttentionOperands changed = x;
        for (std::uint64_t j = cut; j < n; ++j) {
            enlarge_token(changed.k, *r.input, heads, n, d, j);
            enlarge_token(changed.v, *r.input, heads, n, dv, j);
        }
        const emu::ForwardResult f = emu::flash_forward(r, sh, changed, fo);
        for (std::uint64_t h = 0; h < heads; ++h) {
            for (std::uint64_t i = 0; i < cut; ++i) {
                const std::uint64_t at = (h * n + i) * dv;
                if (!std::equal(base.o.begin() + static_cast<std::ptrdiff_t>(at),
                                base.o.begin() + static_cast<std::ptrdiff_t>(at + dv),
                                f.o.begin() + static_cast<std::ptrdiff_t>(at)))
                    ++result.masked_contribution_violations;
            }
        }
    }

    // Quantization blocks that hold both a query's visible keys and its masked ones, used
    // quantized by that query: its own block, unless it is the block's last token (or the fix).
    if (!o.fix) {
        for (std::uint64_t i = 0; i < n; ++i) {
            const std::uint64_t block_end = std::min(n, i / block * block + block);
            if (i + 1 < block_end) result.mixed_scale_blocks += heads;
        }
    }
    return result;
}

}  // namespace roundscope::analysis
