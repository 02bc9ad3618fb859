#pragma once
// The inputs of one attention layer found by name in a tensor file (docs/cli.md): q, k, v
// and optionally o, do, lse and bias. q [.., Nq, D], k [.., Nk, D], v [.., Nk, Dv], o and do
// [.., Nq, Dv], lse [.., Nq], where ".." is nothing, [H] or [B, H], the same for all. bias is
// an additive score bias [.., Nq, Nk], or [Nq, Nk] shared by every head; -inf masks a key.
// For the query-weight gradient (roundscope bias): x, the layer input [Nq, M] or [B, Nq, M]
// (shared by the heads), and wq, the query weight with q = x wq: [M, H * D] or [H, M, D].
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "lib/tensor.hpp"

namespace roundscope::emu {

struct AttentionInputs {
    Tensor q, k, v;
    std::optional<Tensor> o, d_o, lse;
    std::optional<Tensor> bias;
    bool bias_per_head = false;          // bias [.., Nq, Nk] rather than one [Nq, Nk] for all heads
    std::optional<Tensor> x, w_q;        // the layer input and the query weight (w_q needs x)
    bool w_q_per_head = false;           // w_q [H, M, D] rather than [M, H * D]
    std::uint64_t d_model = 0;           // M: x's last dimension
    std::uint64_t batch = 1, heads = 1;  // [N, D] is one head of one batch
    std::uint64_t n_q = 0, n_kv = 0, d = 0, d_v = 0;
    std::optional<bool> causal;           // from the file's metadata "causal"
    std::optional<double> softmax_scale;  // from the file's metadata "softmax_scale"
    // A sample of query rows (emu/attention/row_sample.hpp): row r of q, o, do and lse is row
    // (*query_rows)[r] (ascending) of a problem with query_rows_of of them, whose causal mask it
    // keeps. Null: the rows are the problem's own.
    std::shared_ptr<const std::vector<std::uint64_t>> query_rows;
    std::uint64_t query_rows_of = 0;
};

/// Every tensor must be floating; shapes must agree as above. Errors name the file and tensor.
AttentionInputs find_attention_inputs(const TensorFile& file);

/// The leading [B, H] or [H] dimensions of q followed by `tail`: the shape of an output.
Shape output_shape(const AttentionInputs& in, std::initializer_list<std::uint64_t> tail);

}  // namespace roundscope::emu
