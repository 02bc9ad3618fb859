#pragma once
// Where ATen's CPU flash attention hands oneDNN a GEMM of one row or one column, which oneDNN
// runs as its GEMV (emu/mma/onednn_gemv.hpp), modelled on AVX512-BF16 (product avx512-bf16): a
// query block of one row (ATen's blocks of 32, 64 or 256 rows leave one: decoding one token, or
// 33 queries) computes its S and its P V by the GEMV; a KV block of one key (512 k + 1 keys) its
// S. Internal to emu/attention/flash.
#include <cstdint>
#include <vector>

#include "emu/attention/flash/flash_context.hpp"

namespace roundscope::emu::detail {

/// Whether ATen's last query block holds one row (n_q = 1, 33, 65, ...).
bool aten_one_row_block(const AttentionShape& s);

/// Whether the last KV block (block_n keys) holds one key (n_kv = 513, 1025, ...).
bool aten_one_key_block(const AttentionRecipe& r, const AttentionShape& s);

/// Whether row r of the shape is alone in its ATen query block.
bool aten_gemv_row(const AttentionShape& s, std::uint64_t r);

/// Replaces in s ([rows][keys] float32 bits, the GEMM's) the scores the GEMV computes: those of
/// a row alone in its query block, and of a key alone in its KV block, where the recipe's score
/// product is avx512-bf16. q: row rows.begin's query, k: the head's keys [n_kv][d].
void aten_gemv_scores(const AttentionRecipe& r, const AttentionShape& shape, const std::uint32_t* q,
                      const std::uint32_t* k, Span rows, Span keys, std::vector<std::uint32_t>& s);

/// The rows of `rows` whose P V the GEMV computes (avx512-bf16's P V, a row alone in its block).
std::vector<std::uint64_t> aten_gemv_pv_rows(const AttentionRecipe& r, const AttentionShape& shape, Span rows);

}  // namespace roundscope::emu::detail
