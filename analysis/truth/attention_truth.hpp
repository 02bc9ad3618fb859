#pragma once
// The ground truth of attention: what it gives when nothing is rounded, rounded once to float64
// (the double nearest the exact real result). Forward: S = scale Q K^T + mask, P =
// softmax(S) by rows, O = P V, LSE = log-sum-exp of each row. Backward, given dO: dV = P^T dO,
// dP = dO V^T, delta = rowsum(dO * O), dS = P * (dP - delta), dQ = scale dS K, dK = scale dS^T Q.
//
// The inputs are exact values (any format the project reads); the scale is taken as the exact
// value of a double. Causal masking keeps key j for query i when j <= i + (Nk - Nq): the
// bottom-right alignment of FlashAttention 2.1 and later, which is the usual mask when Nq = Nk.
// Every mask of emu/attention/inputs/attention_mask.hpp is taken: the alignment (a causal mask aligned
// top-left sees j <= i), a window, a boolean mask, an additive mask (exact too; -inf masks the
// key: S = -inf, P = 0; NaN and +inf are errors). A query with no key left gets O = 0,
// LSE = -inf and zero gradients (PyTorch's math backend gives O = 0 too: docs/design.md). Under
// grouped-query attention (k and v with fewer heads) query head h reads key-value head
// h / (H / Hkv), and dK and dV are the exact sums over each group's heads, rounded once.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "emu/attention/inputs/attention_inputs.hpp"
#include "emu/attention/softmax/attention_steps.hpp"

namespace roundscope::analysis {

struct TruthOptions {
    bool causal = false;
    double scale = 0;            // 0: the double nearest 1 / sqrt(D)
    bool backward = false;       // needs dO
    bool gradients = true;       // with backward: dQ, dK and dV as well as delta (false: delta alone,
                                 // which needs only the forward pass's O; dq, dk, dv left empty)
    bool key_gradients = true;   // with gradients: dK and dV too (false: dQ and delta, which need no
                                 // pass over the keys' columns; dk, dv left empty)
    bool intermediates = false;  // also return S and P
    int precision = 256;         // bits of the first attempt; a head is redone at twice as many
                                 // until every output is decided (Ziv), up to max_precision
    int max_precision = 1 << 14;
    int threads = 0;
};

/// Row-major per tensor, heads (batch x heads) first, like the inputs.
struct AttentionTruth {
    std::uint64_t heads = 0, n_q = 0, n_kv = 0, d = 0, d_v = 0;
    bool causal = false;
    double scale = 0;
    std::vector<double> o, lse;  // [heads][n_q][d_v], [heads][n_q]
    std::uint64_t kv_heads = 0;  // heads of dk and dv (heads / the GQA group)
    std::vector<double> delta, dq, dk,
        dv;                            // backward: [heads][n_q], [.., n_q, d], [kv_heads][n_kv][d], [.., n_kv, d_v]
    std::vector<double> s, p;          // intermediates: [heads][n_q][n_kv]
    int max_precision_used = 0;        // the most bits any head needed (reference path)
    std::uint64_t fast_heads = 0;      // heads the fast path decided alone
    std::uint64_t reference_rows = 0;  // rows the fast path handed to the reference
};

/// One query row of the forward pass by the reference path (keys: how many of the n_kv keys the
/// row sees): O [d_v], LSE, and S, P [n_kv] when s and p are not null (entries past `keys` 0).
/// q is [d], k [n_kv][d], v [n_kv][d_v], bias [n_kv] or null. The fast path's fallback for a row it cannot decide.
void reference_forward_row(const double* q, const double* k, const double* v, const double* bias, std::size_t keys,
                           std::size_t n_kv, std::size_t d, std::size_t d_v, double scale, const TruthOptions& options,
                           double* o, double* lse, double* s, double* p);

/// One query row of the backward pass by the reference path: its delta and dQ [d] (d_o: the
/// row's [d_v]; the rest as reference_forward_row). The fast path's fallback for a row whose
/// gradient it cannot decide.
void reference_backward_row(const double* q, const double* k, const double* v, const double* d_o, const double* bias,
                            std::size_t keys, std::size_t n_kv, std::size_t d, std::size_t d_v, double scale,
                            const TruthOptions& options, double* delta, double* dq);

/// The ground truth, fast: the forward and backward passes in double-double balls with rigorous
/// error bounds (double_double.hpp); the reference path for a row whose O, LSE, delta or dQ the
/// balls cannot decide, for a whole head where a dK or dV column is undecided (rare), and for
/// f64 inputs (whose products are not exact in double). The same bits as
/// attention_truth_reference.
AttentionTruth attention_truth(const emu::AttentionInputs& in, const TruthOptions& options);

/// The keys [0, visible_keys(i)) that query i sees: all of them, or under the causal mask those
/// with j <= i + (n_kv - n_q) (bottom-right alignment).
inline std::uint64_t visible_keys(std::uint64_t i, std::uint64_t n_q, std::uint64_t n_kv, bool causal) {
    return emu::steps::visible_keys(i, n_q, n_kv, causal);  // the kernels' rule
}

/// The tensor decoded to doubles (exact); Error naming it for a NaN or Inf element.
std::vector<double> decode_finite(const Tensor& t);

/// What both paths compute as one: the query heads that share a key-value head (one head
/// without grouped-query attention), their rows stacked, so that dK and dV are sums over all of
/// them, rounded once. Row i is query head first_head + i / n_q's row i % n_q, at its position
/// (a sampled row's, or i % n_q); it sees keys [0, keys(i)), those a bias of -inf masks
/// excepted (the mask's dense part and a window's start; null bias: none).
class TruthUnit {
public:
    TruthUnit(const emu::AttentionInputs& in, bool causal, std::uint64_t unit);
    std::uint64_t rows() const { return rows_; }
    std::uint64_t first_head() const { return first_head_; }
    std::size_t keys(std::size_t i) const { return static_cast<std::size_t>(keys_[i]); }
    const double* bias(std::size_t i) const { return bias_.empty() ? nullptr : bias_.data() + i * n_kv_; }

private:
    std::uint64_t rows_ = 0, first_head_ = 0, n_kv_ = 0;
    std::vector<std::uint64_t> keys_;
    std::vector<double> bias_;  // [rows][n_kv], or empty
};

/// The units of `in`: B * Hkv.
inline std::uint64_t truth_units(const emu::AttentionInputs& in) { return in.batch * emu::kv_head_count(in); }

/// The result's shape, scale (the option, else the double nearest 1 / sqrt(D)) and every tensor
/// the options ask for, zero-filled: where both paths start.
AttentionTruth empty_truth(const emu::AttentionInputs& in, const TruthOptions& options);
/// Drops the gradients `options` did not ask for (dQ without `gradients`, dK and dV without
/// `key_gradients`), which both paths compute on the way (the reference, a unit it redoes).
void drop_unasked(AttentionTruth& t, const TruthOptions& options);

/// The reference path: MPFI interval arithmetic, straightforward loops, each head redone at
/// twice the precision until every output interval rounds to a single double. S and dP are
/// exact sums of exact products, rounded once by mpfr_sum. Throws Error for NaN or Inf inputs,
/// a missing dO with `backward`, or an element still undecided at max_precision.
AttentionTruth attention_truth_reference(const emu::AttentionInputs& in, const TruthOptions& options);

}  // namespace roundscope::analysis
