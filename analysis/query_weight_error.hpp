#pragma once
// The error that delta's rounding makes in the query weight's gradient (Qiu & Yao,
// arXiv:2510.04212, "Cause 1"). With q = x W^Q and S = alpha q k^T, dQ = alpha dS K and
// dS = P * (dP - delta), so an error c[T] = (delta_lp - delta_hp)[T] changes dW^Q = x^T dQ by
//   E = dW^Q_hp - dW^Q_lp = alpha sum_T c[T] R_T,   R_T = x[T]^T (PK)[T]   ([M, D], rank 1).
// When the R_T point the same way (a high mean pairwise cosine), E ~ alpha (sum_T c[T]) R: a
// coefficient sum of one sign then pushes W^Q along one direction, step after step.
// (The paper writes R_T as (PK)[T]^T X[T], the transpose, for W^Q stored as [D, M].)
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "analysis/truth/attention_truth.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"

namespace roundscope::analysis {

struct QueryWeightHead {
    std::uint64_t head = 0;
    std::uint64_t rows = 0;             // rows T (over the batch) with x[T] != 0 and (PK)[T] != 0
    double coefficient_sum = 0;         // sum_T c[T] over this head's rows
    double rank1_mean_cosine = 0;       // mean over pairs T != T' of cos(R_T, R_T'); NaN below 2 rows
    double error_structure_cosine = 0;  // cos(E, sum_T R_T / |R_T|): E along the common structure
    double dwq_error_norm = 0;          // |E|_F
    double dwq_norm = 0;                // |dW^Q_hp|_F = |x^T dQ_hp|_F
    std::optional<double> wq_norm;      // |W^Q|_F (with wq)
    // |q - x W^Q|_F / |q|_F (with wq): far from 0 when q is not x W^Q, e.g. after a rotary
    // embedding, where E above is not the gradient error of W^Q.
    std::optional<double> q_projection_residual;
};

struct QueryWeightError {
    std::uint64_t heads = 0, d_model = 0, d = 0;
    std::vector<QueryWeightHead> per_head;
    // over every head: the mean of rank1_mean_cosine, and the Frobenius norms of all heads' E,
    // dW^Q_hp and W^Q together
    double rank1_mean_cosine = 0, dwq_error_norm = 0, dwq_norm = 0;
    std::optional<double> wq_norm;
    std::vector<double> error;      // E, [H][M][D]
    std::vector<double> structure;  // sum_T R_T / |R_T|, [H][M][D]
};

/// For inputs with x (and optionally wq): `delta_error` is c, [B * H][Nq]; `truth` the backward
/// ground truth of `in` (its dQ, scale and mask). (PK)[T] is the exact attention output with K
/// as the values. `written_q`: the q the file holds, whose distance from x W^Q the projection
/// residual reports (null: in.q; `in` may hold q as a kernel rounds it). Deterministic on any
/// thread count.
QueryWeightError query_weight_error(const emu::AttentionInputs& in, std::span<const double> delta_error,
                                    const AttentionTruth& truth, int threads, const Tensor* written_q = nullptr);

/// The errors of several training steps summed: |sum of E| after each step, how each step's
/// common direction compares with the first's, and the coherence |sum E| / sum |E| (1 when every
/// step pushes W^Q the same way, about 1 / sqrt(steps) when the errors point anywhere).
class QueryWeightSteps {
public:
    /// Throws Error naming `step` when its sizes differ from the first step's.
    void add(const QueryWeightError& q, const std::string& step);
    bool empty() const { return cumulative_norm_.empty(); }
    const std::vector<double>& cumulative_norm() const { return cumulative_norm_; }
    const std::vector<double>& structure_cosine_with_first() const { return structure_cosine_; }
    double coherence() const { return empty() ? 0 : cumulative_norm_.back() / norms_sum_; }

private:
    std::vector<double> error_sum_, first_structure_, cumulative_norm_, structure_cosine_;
    double norms_sum_ = 0;
};

}  // namespace roundscope::analysis
