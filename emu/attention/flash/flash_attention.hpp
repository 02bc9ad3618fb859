#pragma once
// The flash-attention emulator: a recipe (attention_recipe.hpp) executed on the CPU exactly as
// the kernel executes it, tile by tile, every product through the tensor-core model, every
// scalar step through the shared code of attention_steps.hpp. Forward: O and LSE; backward:
// delta, dQ, dK, dV. Multi-threaded over heads and row (or column) blocks; the bits do not
// depend on the thread count.
//
// Forward, online softmax, for each block of Br query rows, over the KV blocks of Bc keys in
// the recipe's order (a block every one of whose scores is masked is skipped):
//   S = Q K^T (tensor-core model, f32), t = S * (scale log2 e)   [f32]
//   m' = max(m, rowmax t) (Qiu & Yao's adjustment of the block max when asked), p = exp2(t - m')
//   r = exp2(m - m'), l = l r + sum p (in key order), acc = acc r, acc = P_cast V + acc (model)
// with P_cast = round(p * S) to the P format. Finally O = acc * (1 / (l S)) cast to the O
// format, LSE = (m + log2 l) ln 2. The naive softmax computes the whole row of S first.
//
// Backward (FlashAttention-2's, with dQ in its own pass so that no atomic add makes the order
// depend on timing): delta per row as the recipe says; for each KV block, over the row blocks
// in order, P = exp2(t - LSE log2 e), dV += P_cast^T dO, dP = dO V^T, dS = P (dP - delta),
// dK += dS_cast^T Q; then for each row block, over the KV blocks in order, dQ += dS_cast K;
// dQ and dK are multiplied by the scale at the end. Backward operands are taken in ds_format
// (every input value must be exact in it).
#include <cstdint>
#include <memory>
#include <vector>

#include "emu/attention/inputs/attention_mask.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "emu/attention/softmax/attention_steps.hpp"

namespace roundscope::emu {

struct AttentionShape {
    std::uint64_t heads = 1, n_q = 0, n_kv = 0, d = 0, d_v = 0;
    bool causal = false;  // bottom-right aligned unless the mask says otherwise, as analysis/truth
    float scale = 0;      // softmax scale (float32, as kernels take it)
    // Grouped-query attention: the operands' k and v hold heads / kv_group heads, head h reading
    // head h / kv_group; the backward's dK and dV are the group's (flash_backward).
    std::uint64_t kv_group = 1;
    // The mask beyond the causal flag (attention_mask.hpp: alignment, window, a dense mask), read
    // at each row's position; null: none.
    std::shared_ptr<const ScoreMask> mask;
    double softcap = 0;  // scores capped at +-softcap (0: none)
    // Sampled query rows (AttentionInputs::query_rows): row r is row (*query_rows)[r] of
    // query_rows_of, for the causal mask. Forward passes only (dK and dV need every row).
    std::shared_ptr<const std::vector<std::uint64_t>> query_rows;
    std::uint64_t query_rows_of = 0;
    // B x H of the problem the kernel was launched on, where these heads are some of it (a dump
    // compared head by head): PyTorch's split-KV and split-key choices read it; 0: heads
    std::uint64_t launch_heads = 0;
    // The scale as the caller gave it, in double (0: unknown); PyTorch's math path takes its
    // square root in double, where 1/sqrt(d) and the float32 scale's root can round apart.
    double scale_given = 0;
};

/// B x H as the kernel was launched (launch_heads, or heads).
inline std::uint64_t launched_heads(const AttentionShape& s) { return s.launch_heads != 0 ? s.launch_heads : s.heads; }

/// The problem's query rows (a sample's whole problem, or n_q).
inline std::uint64_t problem_rows(const AttentionShape& s) { return s.query_rows ? s.query_rows_of : s.n_q; }

/// The problem's own index of row r (its sampled position, or r).
inline std::uint64_t query_position(const AttentionShape& s, std::uint64_t r) {
    return s.query_rows ? (*s.query_rows)[r] : r;
}

/// Where the causal mask's diagonal sits: the mask's alignment, bottom-right without one.
inline Alignment causal_alignment(const AttentionShape& s) {
    return s.mask ? s.mask->alignment : Alignment::bottom_right;
}

/// The keys the causal flag, the alignment and the window leave to row r (at its position).
inline KeyRange key_band(const AttentionShape& s, std::uint64_t r) {
    const std::uint64_t n_q = problem_rows(s);
    if (!s.mask) return {0, steps::visible_keys(query_position(s, r), n_q, s.n_kv, s.causal)};
    return s.mask->band(query_position(s, r), n_q, s.n_kv, s.causal);
}

/// The keys [0, visible_keys(s, r)) that row r of the shape may see: the end of its band (keys
/// before the band's start, or masked by a dense mask, are masked within it).
inline std::uint64_t visible_keys(const AttentionShape& s, std::uint64_t r) { return key_band(s, r).end; }

/// Whether row r of head `head` sees key j: in its band and not masked by a dense mask.
inline bool key_visible(const AttentionShape& s, std::uint64_t head, std::uint64_t r, std::uint64_t j) {
    const KeyRange band = key_band(s, r);
    if (j < band.begin || j >= band.end) return false;
    return !s.mask || s.mask->dense.empty() || s.mask->dense_at(head, query_position(s, r), j) != -__builtin_inf();
}

/// The score mask of (head, row r, key j) in natural units: 0 where nothing masks or adds, the
/// dense masks' value, or -inf (outside the row's band, or masked).
inline double key_mask(const AttentionShape& s, std::uint64_t head, std::uint64_t r, std::uint64_t j) {
    const KeyRange band = key_band(s, r);
    if (j < band.begin || j >= band.end) return -__builtin_inf();
    return !s.mask || s.mask->dense.empty() ? 0.0 : s.mask->dense_at(head, query_position(s, r), j);
}

/// Head `head` of the shape as a shape of its own (one head, its mask's view, no groups).
inline AttentionShape one_head_of(const AttentionShape& s, std::uint64_t head) {
    AttentionShape one = s;
    one.heads = 1, one.kv_group = 1;
    if (s.mask && !s.mask->dense.empty()) one.mask = std::make_shared<const ScoreMask>(s.mask->heads(head, 1));
    return one;
}

/// Whether rows see anything but a prefix of the keys, or have scores added to: the masks a
/// per-key bias carries (FlashContext::tile_bias).
inline bool has_key_bias(const AttentionShape& s) {
    return s.mask && (!s.mask->dense.empty() || s.mask->window_left >= 0);
}

/// Whether two shapes sample the same rows (both none, or equal lists of the same problem).
inline bool same_query_rows(const AttentionShape& a, const AttentionShape& b) {
    if (!a.query_rows || !b.query_rows) return !a.query_rows && !b.query_rows;
    return a.query_rows_of == b.query_rows_of && *a.query_rows == *b.query_rows;
}

/// Whether two shapes pose the same problem beyond their sizes: the same key-value groups and
/// the same mask.
inline bool same_mask_and_groups(const AttentionShape& a, const AttentionShape& b) {
    if (a.kv_group != b.kv_group || !a.mask != !b.mask || a.softcap != b.softcap) return false;
    return !a.mask || *a.mask == *b.mask;
}

/// Bit patterns in the recipe's input format, row-major, heads first.
struct AttentionOperands {
    std::vector<std::uint32_t> q, k, v, d_o;  // [h][n_q][d], [h][n_kv][d], [h][n_kv][d_v], [h][n_q][d_v]
};

using steps::ForwardCounts;

struct ForwardResult {
    std::vector<std::uint32_t> o;  // o_format bits, [h][n_q][d_v]
    std::vector<float> o_f32;      // O before its cast
    std::vector<float> lse;        // natural-log LSE, -inf for a row without keys
    std::vector<float> lse_log2;   // m + log2 l, what the backward pass reads
    ForwardCounts counts;
    std::vector<ForwardCounts> head_counts;  // the same, head by head
    // The same, row by row, [h][n_q] (empty for a split-KV run): counts and head_counts are their
    // sums (sum_row_counts), so the rows of a sample can be taken from a larger one's run.
    std::vector<ForwardCounts> row_counts;
};

/// counts and head_counts of `out` as the sums of its row_counts, in the order a run forms them:
/// row by row within each row block of `block_m` rows, then the blocks head by head.
void sum_row_counts(ForwardResult& out, std::uint64_t heads, std::uint64_t n_q, std::uint64_t block_m);

struct BackwardResult {
    std::vector<std::uint32_t> dq, dk, dv;  // grad_format bits; empty where not asked for (BackwardOutputs)
    std::vector<float> delta;
};

/// The backward's outputs a caller reads: all of them; dQ and delta (dK and dV left empty, their
/// products not run); or delta alone. What is computed has the same bits whichever is asked.
enum class BackwardOutputs : std::uint8_t { all, dq, delta };

class RunCache;  // run_cache.hpp

struct ForwardOptions {
    int threads = 0;
    RunCache* runs = nullptr;          // S and whole passes shared with other runs over the same operands
    std::uint64_t uncounted_keys = 0;  // keys [0, n) left out of the counts (an attention sink)
    // Only query rows [row_begin, row_end) (the others: zeros, uncounted). A row's results do
    // not depend on the other rows of its block: every product element is its own row's.
    std::uint64_t row_begin = 0, row_end = ~std::uint64_t{0};
};

/// Throws Error for an invalid recipe (validate), operands whose sizes disagree with the shape,
/// or V values that its quantization makes unrepresentable in the input format.
ForwardResult flash_forward(const AttentionRecipe& recipe, const AttentionShape& shape, const AttentionOperands& in,
                            const ForwardOptions& options);
inline ForwardResult flash_forward(const AttentionRecipe& recipe, const AttentionShape& shape,
                                   const AttentionOperands& in, int threads = 0) {
    ForwardOptions o;
    o.threads = threads;
    return flash_forward(recipe, shape, in, o);
}

/// Why the recipe's backward pass is not modelled (a kernel whose forward only is: cuDNN's,
/// FlashAttention-3's, the memory-efficient kernel's, ATen's CPU kernel; a naive softmax; block-
/// quantized P), in one sentence naming the recipe; empty where flash_backward runs it.
std::string backward_refusal(const AttentionRecipe& recipe);

/// Needs in.d_o and the forward pass of the same inputs; online softmax only. `runs`: S
/// shared with other runs over the same Q and K (or null).
BackwardResult flash_backward(const AttentionRecipe& recipe, const AttentionShape& shape, const AttentionOperands& in,
                              const ForwardResult& forward, int threads = 0, RunCache* runs = nullptr,
                              BackwardOutputs outputs = BackwardOutputs::all);

}  // namespace roundscope::emu
