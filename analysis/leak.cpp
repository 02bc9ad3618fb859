#include "analysis/leak.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/inputs/head_inputs.hpp"
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

// One leak run: the recipe with V quantized as asked, the first n tokens of every head, and the
// forward pass every phase compares against.
struct LeakCase {
    emu::AttentionRecipe recipe;
    emu::AttentionShape shape;
    emu::AttentionOperands x;
    emu::ForwardOptions forward;
    emu::ForwardResult base;
    std::uint64_t n = 0, heads = 0, d = 0, dv = 0, block = 0;

    const emu::Format& o_format() const { return *recipe.output.format; }
    bool same_row(const emu::ForwardResult& f, std::uint64_t h, std::uint64_t i) const {
        const auto at = static_cast<std::ptrdiff_t>((h * n + i) * dv);
        return std::equal(base.o.begin() + at, base.o.begin() + at + static_cast<std::ptrdiff_t>(dv), f.o.begin() + at);
    }
};

LeakCase leak_case(const emu::AttentionInputs& in, const LeakOptions& o) {
    LeakCase c;
    c.recipe = o.recipe;
    c.recipe.p_and_v.v_quant = o.format, c.recipe.p_and_v.v_block = o.block, c.recipe.p_and_v.diagonal_fix = o.fix;
    const emu::AttentionShape full = emu::attention_shape_of(in, true, o.softmax_scale);
    const emu::AttentionOperands all = emu::attention_operands(in, *c.recipe.target.input, false);
    c.n = std::min<std::uint64_t>({full.n_q, full.n_kv, o.max_tokens});
    c.heads = full.heads, c.d = full.d, c.dv = full.d_v, c.block = static_cast<std::uint64_t>(o.block);
    c.shape = full;
    c.shape.n_q = c.shape.n_kv = c.n;
    c.x.q = prefix(all.q, c.heads, full.n_q, c.d, c.n);
    c.x.k = prefix(all.k, c.heads, full.n_kv, c.d, c.n);
    c.x.v = prefix(all.v, c.heads, full.n_kv, c.dv, c.n);
    c.forward.threads = o.threads;
    c.base = emu::flash_forward(c.recipe, c.shape, c.x, c.forward);
    return c;
}

// Token j of every head given token r's V (the same head's row r).
void replace_token(std::vector<std::uint32_t>& x, std::uint64_t heads, std::uint64_t n, std::uint64_t width,
                   std::uint64_t j, std::uint64_t r) {
    for (std::uint64_t h = 0; h < heads; ++h)
        std::copy_n(x.begin() + static_cast<std::ptrdiff_t>((h * n + r) * width), width,
                    x.begin() + static_cast<std::ptrdiff_t>((h * n + j) * width));
}

// Pairs (i, j), j > i in i's V block: change V[j] (enlarged x16, or with `natural` another
// token's), recompute the rows of its block before j. Returns the pairs whose O[i] moved and
// the largest move; with `by_position`, each position's largest move too.
std::pair<std::uint64_t, double> future_influence(const LeakCase& c, bool natural, std::vector<double>* by_position) {
    std::uint64_t leaking = 0;
    double largest = 0;
    for (std::uint64_t j = 1; j < c.n; ++j) {
        const std::uint64_t first = j / c.block * c.block;
        if (first == j) continue;
        emu::AttentionOperands changed = c.x;
        if (natural) {
            // another token at j: its key and its value (its query only moves row j itself)
            replace_token(changed.k, c.heads, c.n, c.d, j, (j + c.n / 2) % c.n);
            replace_token(changed.v, c.heads, c.n, c.dv, j, (j + c.n / 2) % c.n);
        } else {
            enlarge_token(changed.v, *c.recipe.target.input, c.heads, c.n, c.dv, j);
        }
        emu::ForwardOptions rows = c.forward;
        rows.row_begin = first, rows.row_end = j;
        const emu::ForwardResult f = emu::flash_forward(c.recipe, c.shape, changed, rows);
        for (std::uint64_t h = 0; h < c.heads; ++h) {
            for (std::uint64_t i = first; i < j; ++i) {
                if (!c.same_row(f, h, i)) ++leaking;
                const std::uint64_t at = (h * c.n + i) * c.dv;
                const double move = max_abs_difference(c.base.o, f.o, c.o_format(), at, at + c.dv);
                if (by_position != nullptr) (*by_position)[i] = std::max((*by_position)[i], move);
                largest = std::max(largest, move);
            }
        }
    }
    return {leaking, largest};
}

std::uint64_t future_pairs(const LeakCase& c) {
    std::uint64_t pairs = 0;
    for (std::uint64_t j = 1; j < c.n; ++j) pairs += j - j / c.block * c.block;
    return pairs * c.heads;
}

// Parallel against autoregressive: query i with tokens 0..i only (its partial V block then
// quantized zero-padded).
void compare_autoregressive(const LeakCase& c, LeakResult& result) {
    const auto at = [](std::uint64_t row, std::uint64_t width) { return static_cast<std::ptrdiff_t>(row * width); };
    for (std::uint64_t i = 0; i < c.n; ++i) {
        emu::AttentionShape one = c.shape;
        one.n_q = 1, one.n_kv = i + 1;
        // row 0 is query i of a problem of i + 1 queries: its mask and diagonal are query i's
        one.query_rows = std::make_shared<const std::vector<std::uint64_t>>(1, i);
        one.query_rows_of = i + 1;
        emu::AttentionOperands p;
        for (std::uint64_t h = 0; h < c.heads; ++h) {
            const std::uint64_t head = h * c.n;
            p.q.insert(p.q.end(), c.x.q.begin() + at(head + i, c.d), c.x.q.begin() + at(head + i + 1, c.d));
            p.k.insert(p.k.end(), c.x.k.begin() + at(head, c.d), c.x.k.begin() + at(head + i + 1, c.d));
            p.v.insert(p.v.end(), c.x.v.begin() + at(head, c.dv), c.x.v.begin() + at(head + i + 1, c.dv));
        }
        const emu::ForwardResult ar = emu::flash_forward(c.recipe, one, p, c.forward);
        for (std::uint64_t h = 0; h < c.heads; ++h) {
            for (std::uint64_t col = 0; col < c.dv; ++col) {
                const double diff = std::fabs(emu::decode(c.o_format(), ar.o[h * c.dv + col]) -
                                              emu::decode(c.o_format(), c.base.o[(h * c.n + i) * c.dv + col]));
                double& at_i = result.parallel_vs_autoregressive_by_position[i];
                at_i = std::max(at_i, diff);
                result.parallel_vs_autoregressive_max_abs_diff =
                    std::max(result.parallel_vs_autoregressive_max_abs_diff, diff);
            }
        }
    }
}

// Masking: every key and value from a block boundary on replaced; the rows before it must not
// move (their V blocks are untouched, so only a masked key leaking through the softmax or a
// cast could move them).
void check_masking(const LeakCase& c, LeakResult& result) {
    const std::uint64_t cut = c.n / 2 / c.block * c.block;
    if (cut == 0) return;
    emu::AttentionOperands changed = c.x;
    for (std::uint64_t j = cut; j < c.n; ++j) {
        enlarge_token(changed.k, *c.recipe.target.input, c.heads, c.n, c.d, j);
        enlarge_token(changed.v, *c.recipe.target.input, c.heads, c.n, c.dv, j);
    }
    const emu::ForwardResult f = emu::flash_forward(c.recipe, c.shape, changed, c.forward);
    for (std::uint64_t h = 0; h < c.heads; ++h)
        for (std::uint64_t i = 0; i < cut; ++i)
            if (!c.same_row(f, h, i)) ++result.masked_contribution_violations;
}

// Quantization blocks that hold both a query's visible keys and its masked ones, used quantized
// by that query: its own block, unless it is the block's last token (or the fix).
std::uint64_t mixed_scale_blocks(const LeakCase& c) {
    if (c.recipe.p_and_v.diagonal_fix || c.recipe.p_and_v.v_quant == nullptr) return 0;
    std::uint64_t count = 0;
    for (std::uint64_t i = 0; i < c.n; ++i) {
        const std::uint64_t block_end = std::min(c.n, i / c.block * c.block + c.block);
        if (i + 1 < block_end) count += c.heads;
    }
    return count;
}

}  // namespace

LeakResult leak(const emu::AttentionInputs& given, const LeakOptions& o) {
    // k and v indexed by query head (the truth cache knows the inputs by their address: kept)
    const emu::AttentionInputs expanded =
        emu::kv_group(given) > 1 ? emu::kv_per_query_head(given) : emu::AttentionInputs{};
    const emu::AttentionInputs& in = emu::kv_group(given) > 1 ? expanded : given;
    const LeakCase c = leak_case(in, o);
    LeakResult result;
    result.format = o.format != nullptr ? o.format->name : "none", result.block = o.block, result.fix = o.fix;
    result.tokens = c.n;
    result.future_influence_by_position.assign(c.n, 0.0);
    result.parallel_vs_autoregressive_by_position.assign(c.n, 0.0);
    result.future_pairs = future_pairs(c);
    std::tie(result.leaking_pairs, result.max_future_influence) =
        future_influence(c, false, &result.future_influence_by_position);
    if (o.natural) {
        const auto [leaking, largest] = future_influence(c, true, nullptr);
        result.leaking_pairs_natural = leaking, result.max_future_influence_natural = largest;
    }
    compare_autoregressive(c, result);
    check_masking(c, result);
    result.mixed_scale_blocks = mixed_scale_blocks(c);
    return result;
}

}  // namespace roundscope::analysis
