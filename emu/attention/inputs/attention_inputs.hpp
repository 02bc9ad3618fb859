#pragma once
// The inputs of one attention layer found by name in a tensor file (docs/cli.md): q, k, v
// and optionally o, do, lse and a mask. q [.., Nq, D], k [.., Nk, D], v [.., Nk, Dv], o and do
// [.., Nq, Dv], lse [.., Nq], where ".." is nothing, [H] or [B, H], the same for all but k and
// v, which may have fewer heads (grouped-query attention: Hkv dividing H, query head h reading
// key-value head h / (H / Hkv), as PyTorch's enable_gqa does).
// The mask (attention_mask.hpp): `attn_mask`, boolean or additive, broadcast over [B, H, Nq,
// Nk] as PyTorch's scaled_dot_product_attention broadcasts it, or `bias` (additive, the older
// name); metadata "causal", "causal_alignment" (bottom-right or top-left), "window_left" and
// "window_right". "softcap" caps the scores (softcap tanh(s / softcap), Gemma 2's and
// FlashAttention's). What no computation here reproduces is refused, never ignored: dropout
// ("dropout_p" above 0) and FP8 descale factors other than 1.
// For the query-weight gradient (roundscope bias): x, the layer input [Nq, M] or [B, Nq, M]
// (shared by the heads), and wq, the query weight with q = x wq: [M, H * D] or [H, M, D].
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "emu/attention/inputs/attention_mask.hpp"
#include "lib/tensor.hpp"

namespace roundscope::emu {

struct AttentionInputs {
    Tensor q, k, v;
    std::optional<Tensor> o, d_o, lse;
    ScoreMask mask;                      // beyond the causal flag: alignment, window, attn_mask or bias
    std::optional<Tensor> x, w_q;        // the layer input and the query weight (w_q needs x)
    bool w_q_per_head = false;           // w_q [H, M, D] rather than [M, H * D]
    std::uint64_t d_model = 0;           // M: x's last dimension
    std::uint64_t batch = 1, heads = 1;  // [N, D] is one head of one batch
    // B x H of the whole problem a kernel was launched on, where these inputs are some of its heads
    // (head_inputs, group_inputs keep it): PyTorch's split choices read it; 0: batch x heads
    std::uint64_t launch_heads = 0;
    std::uint64_t kv_heads = 0;  // k's and v's heads per batch entry (fewer under GQA); 0: heads
    std::uint64_t n_q = 0, n_kv = 0, d = 0, d_v = 0;
    std::optional<bool> causal;           // from the file's metadata "causal"
    std::optional<double> softmax_scale;  // from the file's metadata "softmax_scale"
    double softcap = 0;                   // metadata "softcap": scores capped at +-softcap (0: none)
    // A sample of query rows (emu/attention/inputs/row_sample.hpp): row r of q, o, do and lse is row
    // (*query_rows)[r] (ascending) of a problem with query_rows_of of them, whose causal mask it
    // keeps. Null: the rows are the problem's own.
    std::shared_ptr<const std::vector<std::uint64_t>> query_rows;
    std::uint64_t query_rows_of = 0;
};

/// Every tensor must be floating; shapes must agree as above. Errors name the file and tensor.
AttentionInputs find_attention_inputs(const TensorFile& file);

/// k's and v's heads per batch entry (heads without grouped-query attention).
inline std::uint64_t kv_head_count(const AttentionInputs& in) { return in.kv_heads == 0 ? in.heads : in.kv_heads; }

/// Query heads per key-value head (1 without grouped-query attention).
inline std::uint64_t kv_group(const AttentionInputs& in) { return in.heads / kv_head_count(in); }

/// Whether anything beyond a bottom-right causal flag shapes the scores: a mask, a window, a
/// top-left alignment, a soft cap.
inline bool has_score_mask(const AttentionInputs& in) { return !in.mask.prefix_only() || in.softcap != 0; }

/// The leading [B, H] or [H] dimensions of q followed by `tail`: the shape of an output.
Shape output_shape(const AttentionInputs& in, std::initializer_list<std::uint64_t> tail);
/// The same with k's heads (Hkv): the shape of dK and dV.
Shape kv_output_shape(const AttentionInputs& in, std::initializer_list<std::uint64_t> tail);

}  // namespace roundscope::emu
