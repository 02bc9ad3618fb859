#include "emu/attention/flash/aten_gemv.hpp"

#include "emu/mma/onednn_gemv.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu::detail {
namespace {

bool one_row_block(const AttentionShape& s) {
    const std::uint64_t n_q = problem_rows(s);
    return n_q > 0 && (n_q - 1) % aten_query_block(n_q) == 0;
}

}  // namespace

bool aten_gemv_row(const AttentionShape& s, std::uint64_t r) {
    return one_row_block(s) && query_position(s, r) == problem_rows(s) - 1;
}

bool aten_gemv_key(const FlashContext& ctx, std::uint64_t j) {
    const auto block = static_cast<std::uint64_t>(ctx.recipe.tiles.block_n);
    return ctx.shape.n_kv > 0 && (ctx.shape.n_kv - 1) % block == 0 && j == ctx.shape.n_kv - 1;
}

void aten_gemv_scores(const FlashContext& ctx, const std::uint32_t* q, const std::uint32_t* k, Span rows, Span keys,
                      std::vector<std::uint32_t>& s) {
    if (ctx.recipe.scores.product != Product::avx512_bf16) return;
    const std::uint64_t d = ctx.shape.d;
    for (std::uint64_t r = 0; r < rows.size(); ++r) {
        const bool row = aten_gemv_row(ctx.shape, rows.begin + r);
        for (std::uint64_t j = keys.begin; j < keys.end; ++j)
            if (row || aten_gemv_key(ctx, j))
                s[r * keys.size() + j - keys.begin] = bits_of(avx512_bf16_gemv_dot(q + r * d, k + j * d, d));
    }
}

std::vector<std::uint64_t> aten_gemv_pv_rows(const FlashContext& ctx, Span rows) {
    std::vector<std::uint64_t> out;
    if (ctx.recipe.p_and_v.product != Product::avx512_bf16) return out;
    for (std::uint64_t r = 0; r < rows.size(); ++r)
        if (aten_gemv_row(ctx.shape, rows.begin + r)) out.push_back(r);
    return out;
}

}  // namespace roundscope::emu::detail
