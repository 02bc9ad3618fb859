#include "analysis/query_weight_error.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "emu/batch/tensor_decode.hpp"
#include "lib/error.hpp"
#include "lib/parallel.hpp"

namespace roundscope::analysis {
namespace {

double norm(std::span<const double> a) { return std::sqrt(std::inner_product(a.begin(), a.end(), a.begin(), 0.0)); }

// (PK)[T]: attention with K as the values, exact like the truth it goes with.
std::vector<double> attention_weighted_keys(const emu::AttentionInputs& in, const AttentionTruth& truth, int threads) {
    emu::AttentionInputs keys = in;
    keys.v = in.k, keys.d_v = in.d;
    keys.o.reset(), keys.d_o.reset(), keys.lse.reset();
    TruthOptions t;
    t.causal = truth.causal, t.scale = truth.scale, t.threads = threads;
    return attention_truth(keys, t).o;
}

// One head's three [M, D] sums over the rows of every batch, accumulated in a fixed order (rows
// of the result split among threads, never the sum over T):
//   E = alpha sum c[T] x[T]^T pk[T],  U = sum x^[T]^T pk^[T] (unit rows),  G = sum x[T]^T dq[T].
struct HeadSums {
    std::vector<double> error, structure, gradient;
    std::uint64_t rows = 0;
};

HeadSums head_sums(const emu::AttentionInputs& in, std::uint64_t h, const std::vector<double>& x,
                   const std::vector<double>& pk, std::span<const double> c, const AttentionTruth& truth, int threads) {
    const std::uint64_t m = in.d_model, d = in.d, n = in.n_q;
    HeadSums s{std::vector<double>(m * d), std::vector<double>(m * d), std::vector<double>(m * d), 0};
    // Per row: the inverse norms of x[T] and pk[T] (0 where either is zero: no direction).
    std::vector<double> inverse_norm(in.batch * n, 0.0);
    for (std::uint64_t b = 0; b < in.batch; ++b)
        for (std::uint64_t t = 0; t < n; ++t) {
            const std::uint64_t row = (b * in.heads + h) * n + t;
            const double nx = norm({x.data() + (b * n + t) * m, m}), np = norm({pk.data() + row * d, d});
            if (nx > 0 && np > 0) inverse_norm[b * n + t] = 1 / (nx * np), ++s.rows;
        }
    constexpr std::size_t grain = 8;
    parallel_for(m, grain, threads, [&](std::size_t begin, std::size_t end) {
        for (std::uint64_t b = 0; b < in.batch; ++b)
            for (std::uint64_t t = 0; t < n; ++t) {
                const std::uint64_t row = (b * in.heads + h) * n + t;
                const double* xt = x.data() + (b * n + t) * m;
                const double *pt = pk.data() + row * d, *gt = truth.dq.data() + row * d;
                const double weight = truth.scale * c[row], unit = inverse_norm[b * n + t];
                for (std::size_t a = begin; a < end; ++a) {
                    double *e = s.error.data() + a * d, *u = s.structure.data() + a * d, *g = s.gradient.data() + a * d;
                    const double xa = xt[a];
                    for (std::uint64_t j = 0; j < d; ++j) {
                        e[j] += weight * xa * pt[j];
                        u[j] += unit * xa * pt[j];
                        g[j] += xa * gt[j];
                    }
                }
            }
    });
    return s;
}

// |q - x W^Q|_F / |q|_F over every batch of head h.
double projection_residual(const emu::AttentionInputs& in, std::uint64_t h, const std::vector<double>& x,
                           const std::vector<double>& q, const std::vector<double>& w) {
    const std::uint64_t m = in.d_model, d = in.d, n = in.n_q;
    // W^Q[a][j] of head h in either layout
    const std::uint64_t row_stride = in.w_q_per_head ? d : in.heads * d, offset = in.w_q_per_head ? h * m * d : h * d;
    double residual = 0, total = 0;
    std::vector<double> projected(d);
    for (std::uint64_t b = 0; b < in.batch; ++b)
        for (std::uint64_t t = 0; t < n; ++t) {
            std::fill(projected.begin(), projected.end(), 0.0);
            for (std::uint64_t a = 0; a < m; ++a)
                for (std::uint64_t j = 0; j < d; ++j)
                    projected[j] += x[(b * n + t) * m + a] * w[offset + a * row_stride + j];
            const double* qt = q.data() + ((b * in.heads + h) * n + t) * d;
            for (std::uint64_t j = 0; j < d; ++j)
                residual += (qt[j] - projected[j]) * (qt[j] - projected[j]), total += qt[j] * qt[j];
        }
    return total > 0 ? std::sqrt(residual / total) : std::sqrt(residual);
}

double head_wq_norm(const emu::AttentionInputs& in, std::uint64_t h, const std::vector<double>& w) {
    const std::uint64_t m = in.d_model, d = in.d;
    if (in.w_q_per_head) return norm({w.data() + h * m * d, m * d});
    double sum = 0;
    for (std::uint64_t a = 0; a < m; ++a)
        for (std::uint64_t j = 0; j < d; ++j) sum += w[a * in.heads * d + h * d + j] * w[a * in.heads * d + h * d + j];
    return std::sqrt(sum);
}

// cos(a, b) of two matrices of the same size (Frobenius inner product); NaN if either is 0.
double frobenius_cosine(std::span<const double> a, std::span<const double> b) {
    const double na = norm(a), nb = norm(b);
    if (na == 0 || nb == 0) return std::numeric_limits<double>::quiet_NaN();
    return std::inner_product(a.begin(), a.end(), b.begin(), 0.0) / (na * nb);
}

}  // namespace

void QueryWeightSteps::add(const QueryWeightError& q, const std::string& step) {
    if (first_structure_.empty()) {
        first_structure_ = q.structure, error_sum_.assign(q.error.size(), 0.0);
    } else if (q.structure.size() != first_structure_.size()) {
        throw Error(step + ": x and q have other sizes than in the first step (the dW^Q errors cannot be summed)");
    }
    for (std::size_t i = 0; i < error_sum_.size(); ++i) error_sum_[i] += q.error[i];
    norms_sum_ += q.dwq_error_norm;
    cumulative_norm_.push_back(norm(error_sum_));
    structure_cosine_.push_back(frobenius_cosine(q.structure, first_structure_));
}

QueryWeightError query_weight_error(const emu::AttentionInputs& in, std::span<const double> delta_error,
                                    const AttentionTruth& truth, int threads, const Tensor* written_q) {
    if (!in.x) throw Error("bias: the query-weight error needs the layer input 'x'");
    const std::uint64_t m = in.d_model, d = in.d, rows = in.batch * in.heads * in.n_q;
    if (delta_error.size() != rows || truth.dq.size() != rows * d)
        throw Error("bias: internal: delta error or dQ of the wrong size");
    const std::vector<double> x = decode_finite(*in.x), pk = attention_weighted_keys(in, truth, threads);
    std::vector<double> q, w;
    if (in.w_q) q = emu::decode_tensor<double>(written_q != nullptr ? *written_q : in.q), w = decode_finite(*in.w_q);

    QueryWeightError r;
    r.heads = in.heads, r.d_model = m, r.d = d;
    r.error.reserve(in.heads * m * d), r.structure.reserve(in.heads * m * d);
    for (std::uint64_t h = 0; h < in.heads; ++h) {
        const HeadSums s = head_sums(in, h, x, pk, delta_error, truth, threads);
        QueryWeightHead head;
        head.head = h, head.rows = s.rows;
        for (std::uint64_t b = 0; b < in.batch; ++b)
            for (std::uint64_t t = 0; t < in.n_q; ++t)
                head.coefficient_sum += delta_error[(b * in.heads + h) * in.n_q + t];
        // sum over all pairs (T, T') of cos(R_T, R_T') is |U|_F^2, with the rows' own n ones in it
        const double n = static_cast<double>(s.rows), u = norm(s.structure);
        head.rank1_mean_cosine = s.rows >= 2 ? (u * u - n) / (n * (n - 1)) : std::numeric_limits<double>::quiet_NaN();
        head.error_structure_cosine = frobenius_cosine(s.error, s.structure);
        head.dwq_error_norm = norm(s.error), head.dwq_norm = norm(s.gradient);
        if (in.w_q)
            head.wq_norm = head_wq_norm(in, h, w), head.q_projection_residual = projection_residual(in, h, x, q, w);
        r.per_head.push_back(head);
        r.error.insert(r.error.end(), s.error.begin(), s.error.end());
        r.structure.insert(r.structure.end(), s.structure.begin(), s.structure.end());
    }
    double cosines = 0, counted = 0, error = 0, gradient = 0, weight = 0;
    for (const QueryWeightHead& head : r.per_head) {
        if (!std::isnan(head.rank1_mean_cosine)) cosines += head.rank1_mean_cosine, ++counted;
        error += head.dwq_error_norm * head.dwq_error_norm, gradient += head.dwq_norm * head.dwq_norm;
        if (head.wq_norm) weight += *head.wq_norm * *head.wq_norm;
    }
    r.rank1_mean_cosine = counted > 0 ? cosines / counted : std::numeric_limits<double>::quiet_NaN();
    r.dwq_error_norm = std::sqrt(error), r.dwq_norm = std::sqrt(gradient);
    if (in.w_q) r.wq_norm = std::sqrt(weight);
    return r;
}

}  // namespace roundscope::analysis
