#include "emu/attention/flash/aten_gemv.hpp"

#include "emu/mma/onednn_gemv.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu::detail {

bool aten_one_row_block(const AttentionShape& s) {
    const std::uint64_t n_q = problem_rows(s);
    return n_q > 0 && (n_q - 1) % aten_query_block(n_q) == 0;
}

bool aten_one_key_block(const AttentionRecipe& r, const AttentionShape& s) {
    return s.n_kv > 0 && (s.n_kv - 1) % static_cast<std::uint64_t>(r.tiles.block_n) == 0;
}

bool aten_gemv_row(const AttentionShape& s, std::uint64_t r) {
    return aten_one_row_block(s) && query_position(s, r) == problem_rows(s) - 1;
}

void aten_gemv_scores(const AttentionRecipe& r, const AttentionShape& shape, const std::uint32_t* q,
                      const std::uint32_t* k, Span rows, Span keys, std::vector<std::uint32_t>& s) {
    if (r.scores.product != Product::avx512_bf16) return;
    const std::uint64_t d = shape.d;
    const bool one_key = aten_one_key_block(r, shape);
    for (std::uint64_t row = 0; row < rows.size(); ++row) {
        const bool alone = aten_gemv_row(shape, rows.begin + row);
        for (std::uint64_t j = keys.begin; j < keys.end; ++j)
            if (alone || (one_key && j == shape.n_kv - 1))
                s[row * keys.size() + j - keys.begin] = bits_of(avx512_bf16_gemv_dot(q + row * d, k + j * d, d));
    }
}

std::vector<std::uint64_t> aten_gemv_pv_rows(const AttentionRecipe& r, const AttentionShape& shape, Span rows) {
    std::vector<std::uint64_t> out;
    if (r.p_and_v.product != Product::avx512_bf16) return out;
    for (std::uint64_t row = 0; row < rows.size(); ++row)
        if (aten_gemv_row(shape, rows.begin + row)) out.push_back(row);
    return out;
}

}  // namespace roundscope::emu::detail
