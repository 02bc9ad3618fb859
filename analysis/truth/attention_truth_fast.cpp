// The fast ground truth, forward and backward: the reference's formulas in double-double balls
// (double_double.hpp), every output decided from its ball; a forward row, or in the backward
// pass a whole head, where one is not is taken from the reference path. Same bits as
// attention_truth_reference (tests/analysis/test_truth_fast.cpp).
//
// Products of inputs with at most 26 significant bits (every format roundscope reads except
// f64) are exact in double, so S = scale * sum q k is a cascaded two-sum in three levels
// (Ogita, Rump and Oishi's SumK, K = 3) whose error is at most gamma_n^3 sum |q k|.
#include <mpfr.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>

#include "analysis/truth/attention_truth.hpp"
#include "analysis/truth/double_double.hpp"
#include "analysis/truth/truth_kernels.hpp"
#include "emu/attention/inputs/head_inputs.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "lib/error.hpp"
#include "lib/parallel.hpp"

namespace roundscope::analysis {
namespace {

using dd::Ball;

// Whether every product of two elements is exact in double and far from underflow and
// overflow: at most 26 significant bits and a magnitude in [2^-400, 2^400] (or zero). Every
// format roundscope reads except f64 passes; f64 tensors go to the reference path.
bool products_exact(const std::vector<double>& x) {
    for (const double v : x) {
        const std::uint64_t m = std::bit_cast<std::uint64_t>(v) & ((std::uint64_t{1} << 52) - 1);
        if (v == 0) continue;
        if (std::countr_zero(m | (std::uint64_t{1} << 52)) < 52 - 25) return false;
        if (std::fabs(v) < 0x1p-400 || std::fabs(v) > 0x1p400) return false;
    }
    return true;
}

double gamma(double n) { return n * dd::u / (1 - n * dd::u); }

// A Sum3 result (truth_kernels.hpp) as a ball: |sum + c1 + c2 - exact| <= gamma_n^3 magnitude,
// the magnitude accumulated with at most n roundings (hence the factor 1 + 2 gamma_n).
Ball sum3_ball(double sum, double c1, double c2, double magnitude, double n) {
    const double g = gamma(n);
    const Ball head{dd::two_sum(sum, c1), dd::up(g * g * g * magnitude * (1 + 2 * g))};
    return dd::add(head, dd::exact(c2));
}

// An upper bound of e^y (y <= 0) by a power of two: e^y <= 2^ceil(y log2 e).
double exp_upper_bound(double y) { return std::ldexp(1.0, static_cast<int>(std::floor(y * 1.4426)) + 2); }

// The interval [v - r, v + r] of a ball in MPFR, rounded outward (hi + lo is exact at the
// 160 bits the callers use).
void ball_bounds(const Ball& x, mpfr_ptr lo, mpfr_ptr hi) {
    mpfr_set_d(lo, x.v.hi, MPFR_RNDN);
    mpfr_add_d(lo, lo, x.v.lo, MPFR_RNDN);
    mpfr_set(hi, lo, MPFR_RNDN);
    mpfr_sub_d(lo, lo, x.r, MPFR_RNDD);
    mpfr_add_d(hi, hi, x.r, MPFR_RNDU);
}

// A ball around the interval [lo, hi] (MPFR): its midpoint as a double-double.
Ball ball_of(mpfr_srcptr lo, mpfr_srcptr hi) {
    mpfr_t mid, rest, radius;
    mpfr_inits2(mpfr_get_prec(lo) + 2, mid, rest, radius, static_cast<mpfr_ptr>(nullptr));
    mpfr_add(mid, lo, hi, MPFR_RNDN);
    mpfr_div_2ui(mid, mid, 1, MPFR_RNDN);
    const double h = mpfr_get_d(mid, MPFR_RNDN);
    mpfr_sub_d(rest, mid, h, MPFR_RNDN);
    const double l = mpfr_get_d(rest, MPFR_RNDN);
    // radius >= max(hi - (h + l), (h + l) - lo)
    mpfr_set_d(rest, h, MPFR_RNDN);
    mpfr_add_d(rest, rest, l, MPFR_RNDN);
    mpfr_sub(radius, hi, rest, MPFR_RNDU);
    mpfr_sub(mid, rest, lo, MPFR_RNDU);
    mpfr_max(radius, radius, mid, MPFR_RNDU);
    const double r = mpfr_get_d(radius, MPFR_RNDU);
    mpfr_clears(mid, rest, radius, static_cast<mpfr_ptr>(nullptr));
    return {dd::fast_two_sum(h, l), r};
}

struct RowOutput {
    double *o, *lse, *s, *p;  // s, p null unless wanted
};

// The scores and exponentials of one query row: S_j = scale q . k_j + bias_j (exact products,
// three-level sums), e_j = e^(S_j - shift) with shift the largest S_j's leading part (or, for
// S_j more than 600 below it, only a bound: tiny). A key whose bias is -inf is masked: e_j = 0
// exactly. live counts the keys not masked.
enum class Term : char { normal, tiny, masked };

struct RowExps {
    std::vector<Ball> s, e;
    std::vector<Term> kind;
    std::size_t live = 0;
    double shift = 0;
};

RowExps row_exps(const double* q, const double* kt, const double* bias, std::size_t n_kv, std::size_t keys,
                 std::size_t d, double scale) {
    constexpr double minus_inf = -std::numeric_limits<double>::infinity();
    RowExps r;
    r.s.resize(keys), r.e.resize(keys), r.kind.assign(keys, Term::normal);
    std::vector<double> sum(keys), c1(keys), c2(keys), magnitude(keys);
    score_sums(q, kt, n_kv, keys, d, sum.data(), c1.data(), c2.data(), magnitude.data());
    r.shift = minus_inf;
    for (std::size_t j = 0; j < keys; ++j) {
        if (bias != nullptr && bias[j] == minus_inf) {
            r.kind[j] = Term::masked;
            r.s[j] = dd::exact(0), r.e[j] = dd::exact(0);
            continue;
        }
        r.s[j] = dd::mul(sum3_ball(sum[j], c1[j], c2[j], magnitude[j], static_cast<double>(d)), scale);
        if (bias != nullptr) r.s[j] = dd::add(r.s[j], dd::exact(bias[j]));
        r.shift = std::max(r.shift, r.s[j].v.hi);
        ++r.live;
    }
    // The exponentials of the normal terms together, on vectors.
    std::vector<std::size_t> at;
    std::vector<double> hi, lo, rad;
    at.reserve(keys), hi.reserve(keys), lo.reserve(keys), rad.reserve(keys);
    for (std::size_t j = 0; j < keys; ++j) {
        if (r.kind[j] == Term::masked) continue;
        const Ball x = dd::add(r.s[j], dd::exact(-r.shift));
        if (x.v.hi + x.r < -600) {
            r.kind[j] = Term::tiny;  // e^x < 2^-865: only its bound enters the sums
            r.e[j] = {{0, 0}, exp_upper_bound(x.v.hi + x.r)};
        } else {
            at.push_back(j), hi.push_back(x.v.hi), lo.push_back(x.v.lo), rad.push_back(x.r);
        }
    }
    std::vector<double> e_hi(at.size()), e_lo(at.size()), e_r(at.size());
    dd::exp_many(at.size(), hi.data(), lo.data(), rad.data(), e_hi.data(), e_lo.data(), e_r.data());
    for (std::size_t i = 0; i < at.size(); ++i) r.e[at[i]] = {{e_hi[i], e_lo[i]}, e_r[i]};
    return r;
}

// sum_j x_j * w[j * dv + c] for c < dv as balls: x_j balls, w exact with at most 27
// significant bits. The error of term j is at most coefficient_j |w|, with
//   coefficient_j = x_j's radius + u |x_lo| (the rounded x_lo w)
//                 + (gamma_n^3 + 2 gamma_n u) (|x_hi| (1 + 2^-24) + |x_lo|) (1 + 2u)
// for the three-level sum (its first level takes terms of magnitude at most |x_hi| (1 + 2^-24)
// |w|: rounded products, or the exact halves without FMA) and the plain sum in the last level
// of the extra terms, at most u |x_hi w| (1 + u) + |x_lo w| (1 + u) <= 2u |x_hi w| (1 + u) per
// term. So the radius is the weighted sum, rounded up, plus 4 times the least subnormal for each
// nonzero term, whose products may underflow (an exact-product error, or x_lo w, below 2^-1022).
// Whether sum_j x_j * w[j * dv + c] is a sum of exact zeros.
bool exact_zero_column(const std::vector<Ball>& x, const double* w, std::size_t dv, std::size_t c) {
    for (std::size_t j = 0; j < x.size(); ++j)
        if (w[j * dv + c] != 0 && (x[j].v.hi != 0 || x[j].v.lo != 0 || x[j].r != 0)) return false;
    return true;
}

std::vector<Ball> ball_weighted_sums(const std::vector<Ball>& x, const double* w, std::size_t dv) {
    const std::size_t n = x.size();
    const double terms = 3.0 * static_cast<double>(n), g = gamma(terms);
    const double level_error = dd::up(g * g * g + 2 * g * dd::u);
    std::vector<double> x_hi(n), x_lo(n), coefficient(n);
    double nonzero = 0;  // terms that can underflow: an all-zero sum stays exactly zero
    for (std::size_t j = 0; j < n; ++j) {
        x_hi[j] = x[j].v.hi, x_lo[j] = x[j].v.lo;
        if (x_hi[j] != 0 || x_lo[j] != 0) ++nonzero;
        const double magnitude = dd::up((std::fabs(x_hi[j]) * (1 + 0x1p-24) + std::fabs(x_lo[j])) * (1 + 2 * dd::u));
        coefficient[j] = dd::up(x[j].r + dd::u * std::fabs(x_lo[j]) + level_error * magnitude);
    }
    std::vector<double> sum(dv), c1(dv), c2(dv), weighted(dv);
    weighted_sums(x_hi.data(), x_lo.data(), coefficient.data(), w, n, dv, sum.data(), c1.data(), c2.data(),
                  weighted.data());
    const double underflow = 4 * nonzero * 0x1p-1074;
    std::vector<Ball> out(dv);
    for (std::size_t c = 0; c < dv; ++c) {
        out[c] = dd::add(Ball{dd::two_sum(sum[c], c1[c]), 0}, dd::exact(c2[c]));
        out[c].r = dd::up(out[c].r + weighted[c] * (1 + 2 * gamma(static_cast<double>(n) + 1)) + underflow);
        // A column whose every product is an exact zero (x_j an exact zero ball, or w_j = 0: the
        // gradient of a row the loss does not reach) is exactly zero; its underflow allowance
        // would leave the ball straddling zero.
        if (out[c].v.hi == 0 && out[c].v.lo == 0 && weighted[c] == 0 && exact_zero_column(x, w, dv, c)) out[c].r = 0;
    }
    return out;
}

// What the backward pass needs of a row's forward pass: the exact O and P as balls (not
// rounded), P in a head's [n_q][n_kv] array (entries past the row's keys stay zero).
struct RowState {
    std::vector<Ball> o;
    Ball* p = nullptr;
    bool single = false;  // one live key: P = 1, and dS = 0 exactly
};

// The MPFR interval [lo, hi] of a double-double ball's value, at 160 bits (enough for hi + lo).
struct BallInterval {
    mpfr_t lo, hi;
    explicit BallInterval(const Ball& x) {
        mpfr_inits2(160, lo, hi, static_cast<mpfr_ptr>(nullptr));
        ball_bounds(x, lo, hi);
    }
    ~BallInterval() { mpfr_clears(lo, hi, static_cast<mpfr_ptr>(nullptr)); }
    BallInterval(const BallInterval&) = delete;
    BallInterval& operator=(const BallInterval&) = delete;
};

// A row with no key it may see: O = 0, LSE = -inf, P = 0; S = -inf where the bias masks a key.
void empty_row(const RowExps& r, std::size_t n_kv, std::size_t dv, const RowOutput& out, RowState* state) {
    for (std::size_t c = 0; c < dv; ++c) out.o[c] = 0;
    *out.lse = -std::numeric_limits<double>::infinity();
    if (out.p != nullptr) {
        for (std::size_t j = 0; j < n_kv; ++j) {
            out.s[j] = j < r.kind.size() ? -std::numeric_limits<double>::infinity() : 0;
            out.p[j] = 0;
        }
    }
    if (state != nullptr) state->o.assign(dv, dd::exact(0));
}

// One query row; false if an output cannot be decided from its ball.
bool fast_row(const double* q, const double* kt, const double* v, const double* bias, std::size_t n_kv,
              std::size_t keys, std::size_t d, std::size_t dv, double scale, const RowOutput& out, RowState* state) {
    const RowExps r = row_exps(q, kt, bias, n_kv, keys, d, scale);
    if (r.live == 0) {
        empty_row(r, n_kv, dv, out, state);
        return true;
    }
    Ball l = dd::exact(0);
    for (const Ball& e : r.e) l = dd::add(l, e);
    // 1 / l and log l from the interval of l, in MPFR (once per row).
    const BallInterval sum(l);
    mpfr_t log_lo, log_hi;
    mpfr_inits2(160, log_lo, log_hi, static_cast<mpfr_ptr>(nullptr));
    mpfr_log(log_lo, sum.lo, MPFR_RNDD);
    mpfr_log(log_hi, sum.hi, MPFR_RNDU);
    mpfr_add_d(log_lo, log_lo, r.shift, MPFR_RNDD);
    mpfr_add_d(log_hi, log_hi, r.shift, MPFR_RNDU);
    const double lse_lo = mpfr_get_d(log_lo, MPFR_RNDN), lse_hi = mpfr_get_d(log_hi, MPFR_RNDN);
    mpfr_ui_div(log_lo, 1, sum.hi, MPFR_RNDD);
    mpfr_ui_div(log_hi, 1, sum.lo, MPFR_RNDU);
    const Ball inverse_l = ball_of(log_lo, log_hi);
    mpfr_clears(log_lo, log_hi, static_cast<mpfr_ptr>(nullptr));
    // One live key: P = 1 and LSE = S exactly (the interval of log l would be absolute, not
    // relative, and fail to decide an LSE near 0).
    const bool single = r.live == 1;
    auto p_of = [&](std::size_t j) {
        if (r.kind[j] == Term::masked) return dd::exact(0);
        return single ? dd::exact(1) : dd::mul(r.e[j], inverse_l);
    };
    if (single) {
        const auto j = static_cast<std::size_t>(std::find(r.kind.begin(), r.kind.end(), Term::normal) - r.kind.begin());
        if (!dd::round_to_double(r.s[j], *out.lse)) return false;
    } else {
        if (lse_lo != lse_hi) return false;
        *out.lse = lse_lo;
    }

    // O = (sum_j e_j v_j) / l.
    const std::vector<Ball> numerator = ball_weighted_sums(r.e, v, dv);
    if (state != nullptr) {
        state->o.resize(dv);
        state->single = single;
        if (state->p != nullptr)
            for (std::size_t j = 0; j < keys; ++j) state->p[j] = p_of(j);
    }
    for (std::size_t c = 0; c < dv; ++c) {
        const Ball o = dd::mul(numerator[c], inverse_l);
        if (state != nullptr) state->o[c] = o;
        // An O of zero or below 2^-1020 is left to the reference.
        if (!dd::round_to_double(o, out.o[c])) return false;
    }
    if (out.p != nullptr) {
        for (std::size_t j = 0; j < n_kv; ++j) {
            if (j >= keys) {
                out.s[j] = out.p[j] = 0;
                continue;
            }
            if (r.kind[j] == Term::masked) {
                out.s[j] = -std::numeric_limits<double>::infinity(), out.p[j] = 0;
                continue;
            }
            if (!dd::round_to_double(r.s[j], out.s[j])) return false;
            const Ball p = p_of(j);
            if (r.kind[j] == Term::tiny) {
                // P < 2^-1075 rounds to +0; anything larger is left to the reference.
                if (std::ldexp(dd::up(p.r), 1074) >= 0.5) return false;
                out.p[j] = 0;
            } else if (!dd::round_to_double(p, out.p[j])) {
                return false;
            }
        }
    }
    return true;
}

// A row-major [rows][cols] matrix as [cols][rows]: the score kernels walk K and V by columns.
std::vector<double> transposed(const double* x, std::size_t rows, std::size_t cols) {
    std::vector<double> t(rows * cols);
    for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
    }
    return t;
}

// The backward pass of one head from its forward states; false if an output is undecided.
// dS = P (dP - delta) with dP = dO V^T (exact products) and delta = rowsum(dO * O) from the
// exact O's balls; dQ = scale dS K by rows, dK = scale dS^T Q and dV = P^T dO by columns.
struct HeadBackward {
    const double *q, *k, *v, *d_o, *vt;
    std::size_t nq, nk, d, dv;
    double scale;
    const std::vector<RowState>* states;
    const std::vector<Ball>* p;  // each row's keys it sees, row i from (*row_at)[i]: the forward pass's
    const std::vector<std::size_t>* row_at;
    std::function<std::size_t(std::size_t)> keys_of;
    std::function<const double*(std::size_t)> bias_of;  // row i's bias, or null
    const TruthOptions* options;
    double *delta, *dq, *dk, *dvv;
    std::uint64_t* reference_rows;
};

// delta = rowsum(dO * O) of one row, from its exact O's balls.
Ball delta_ball(const RowState& st, const double* d_o, std::size_t dv) {
    Ball delta = dd::exact(0);
    for (std::size_t c = 0; c < dv; ++c) delta = dd::add(delta, dd::mul(st.o[c], d_o[c]));
    return delta;
}

// delta = rowsum(dO * O) alone, from the exact O's balls (a row they leave undecided from the
// reference, which also gives its dQ, unused here).
void fast_delta(const HeadBackward& h, int threads) {
    std::vector<char> by_reference(h.nq, 0);
    parallel_for(h.nq, 4, threads, [&](std::size_t begin, std::size_t end) {
        std::vector<double> dq(h.d);
        for (std::size_t i = begin; i < end; ++i) {
            const RowState& st = (*h.states)[i];
            const double* d_o = h.d_o + i * h.dv;
            if (dd::round_to_double(delta_ball(st, d_o, h.dv), h.delta[i])) continue;
            reference_backward_row(h.q + i * h.d, h.k, h.v, d_o, h.bias_of(i), h.keys_of(i), h.nk, h.d, h.dv, h.scale,
                                   *h.options, h.delta + i, dq.data());
            by_reference[i] = 1;
        }
    });
    *h.reference_rows += static_cast<std::uint64_t>(std::count(by_reference.begin(), by_reference.end(), 1));
}

// dQ (and delta) row by row; with `columns`, dK and dV as well, from every row's dS kept (without
// them a row's dS lives only while its row is worked on: no [query][key] matrix).
bool fast_backward(const HeadBackward& h, bool columns, int threads) {
    const std::size_t nq = h.nq, nk = h.nk, d = h.d, dv = h.dv;
    const std::vector<Ball>& p = *h.p;
    const std::vector<std::size_t>& row_at = *h.row_at;
    std::vector<Ball> ds(columns ? row_at[nq] : 0, dd::exact(0));  // as P: each row's keys
    std::vector<char> decided(nk, 1), by_reference(nq, 0);
    // A row's dS sums to zero exactly (sum_j P (dP_j - delta) = delta - delta), so where every
    // key a row sees has the same value in feature c, dQ[c] = scale k_c sum_j dS_j is exactly
    // zero; its ball would straddle zero. same_until[c]: the keys [0, n) sharing key 0's value.
    std::vector<std::size_t> same_until(d, nk);
    for (std::size_t c = 0; c < d; ++c)
        for (std::size_t j = 1; j < nk; ++j)
            if (h.k[j * d + c] != h.k[c]) {
                same_until[c] = j;
                break;
            }
    parallel_for(nq, 4, threads, [&](std::size_t begin, std::size_t end) {
        std::vector<double> sum(nk), c1(nk), c2(nk), magnitude(nk);
        std::vector<Ball> own_row(columns ? 0 : nk);
        for (std::size_t i = begin; i < end; ++i) {
            const RowState& st = (*h.states)[i];
            const double* d_o = h.d_o + i * dv;
            const Ball delta = delta_ball(st, d_o, dv);
            bool ok = dd::round_to_double(delta, h.delta[i]);
            const std::size_t keys = h.keys_of(i);
            Ball* row = columns ? ds.data() + row_at[i] : own_row.data();
            if (!columns) std::fill(row, row + keys, dd::exact(0));
            // One live key: P = 1 and delta = dP exactly, so dS = 0 (a ball would straddle it);
            // a masked key has P = 0 exactly, hence dS = 0.
            if (!st.single && keys > 0) {
                score_sums(d_o, h.vt, nk, keys, dv, sum.data(), c1.data(), c2.data(), magnitude.data());
                for (std::size_t j = 0; j < keys; ++j) {
                    const Ball dp = sum3_ball(sum[j], c1[j], c2[j], magnitude[j], static_cast<double>(dv));
                    row[j] = dd::mul(p[row_at[i] + j], dd::add(dp, dd::negate(delta)));
                }
            }
            const std::vector<Ball> dq = ball_weighted_sums(std::vector<Ball>(row, row + keys), h.k, d);
            for (std::size_t c = 0; c < d && ok; ++c) {
                if (keys <= same_until[c])
                    h.dq[i * d + c] = 0;
                else
                    ok = dd::round_to_double(dd::mul(dq[c], h.scale), h.dq[i * d + c]);
            }
            // A delta or dQ its ball leaves undecided (heavy cancellation in dS, as where two
            // tied keys hold nearly all of the row): the row's gradient from the reference. Its
            // dS balls stay valid for the columns.
            if (!ok) {
                reference_backward_row(h.q + i * d, h.k, h.v, d_o, h.bias_of(i), keys, nk, d, dv, h.scale, *h.options,
                                       h.delta + i, h.dq + i * d);
                by_reference[i] = 1;
            }
        }
    });

    if (!columns) {
        *h.reference_rows += static_cast<std::uint64_t>(std::count(by_reference.begin(), by_reference.end(), 1));
        return true;
    }
    // Columns in chunks of 8 keys, gathered row by row (8 neighbouring balls at a time), over
    // the rows that see a key of the chunk: a row sees keys [0, keys), and past them its P and dS
    // are exact zeros, which add nothing to a column; leaving them out only tightens its balls
    // (fewer terms), so every output decided is the same. Under a causal mask this halves the pass.
    constexpr std::size_t chunk = 8;
    parallel_for(nk, chunk, threads, [&](std::size_t begin, std::size_t end) {
        const std::size_t width = end - begin;
        std::vector<std::size_t> rows;
        for (std::size_t i = 0; i < nq; ++i)
            if (row_at[i + 1] - row_at[i] > begin) rows.push_back(i);
        const std::size_t m = rows.size();
        std::vector<double> d_o(m * dv), q(m * d);                      // the rows' dO and Q, gathered
        std::vector<Ball> p_columns(width * m), ds_columns(width * m);  // [key][row]
        for (std::size_t r = 0; r < m; ++r) {
            const std::size_t i = rows[r];
            std::copy_n(h.d_o + i * dv, dv, d_o.begin() + static_cast<std::ptrdiff_t>(r * dv));
            std::copy_n(h.q + i * d, d, q.begin() + static_cast<std::ptrdiff_t>(r * d));
            const std::size_t keys = row_at[i + 1] - row_at[i];  // past them P = dS = 0
            for (std::size_t j = 0; j < width; ++j) {
                const bool seen = begin + j < keys;
                p_columns[j * m + r] = seen ? p[row_at[i] + begin + j] : dd::exact(0);
                ds_columns[j * m + r] = seen ? ds[row_at[i] + begin + j] : dd::exact(0);
            }
        }
        for (std::size_t j = 0; j < width; ++j) {
            auto column = [&](const std::vector<Ball>& x) {
                return std::vector<Ball>(x.begin() + static_cast<std::ptrdiff_t>(j * m),
                                         x.begin() + static_cast<std::ptrdiff_t>((j + 1) * m));
            };
            const std::vector<Ball> dvj = ball_weighted_sums(column(p_columns), d_o.data(), dv);
            const std::vector<Ball> dkj = ball_weighted_sums(column(ds_columns), q.data(), d);
            const std::size_t key = begin + j;
            bool ok = true;
            for (std::size_t c = 0; c < dv && ok; ++c) ok = dd::round_to_double(dvj[c], h.dvv[key * dv + c]);
            for (std::size_t c = 0; c < d && ok; ++c)
                ok = dd::round_to_double(dd::mul(dkj[c], h.scale), h.dk[key * d + c]);
            if (!ok) decided[key] = 0;
        }
    });
    if (std::find(decided.begin(), decided.end(), 0) != decided.end()) return false;
    *h.reference_rows += static_cast<std::uint64_t>(std::count(by_reference.begin(), by_reference.end(), 1));
    return true;
}

}  // namespace

AttentionTruth attention_truth(const emu::AttentionInputs& in, const TruthOptions& options) {
    if (in.query_rows && options.backward && options.gradients)
        throw Error("a sample of query rows has no dK and dV (they need every row): ask for delta alone");
    if (options.backward && !in.d_o) return attention_truth_reference(in, options);  // which names what is missing
    if (in.softcap != 0) return attention_truth_reference(in, options);              // tanh has no ball here
    const std::vector<double> q = emu::decode_tensor<double>(in.q), k = emu::decode_tensor<double>(in.k),
                              v = emu::decode_tensor<double>(in.v);
    const std::vector<double> d_o = options.backward ? emu::decode_tensor<double>(*in.d_o) : std::vector<double>();
    for (const auto* x : {&q, &k, &v, &d_o}) {
        for (const double y : *x) {
            if (!std::isfinite(y)) return attention_truth_reference(in, options);  // which names the tensor
        }
        if (!products_exact(*x)) return attention_truth_reference(in, options);
    }

    AttentionTruth t = empty_truth(in, options);
    const std::size_t nq = t.n_q, nk = t.n_kv, d = t.d, dv = t.d_v, g = emu::kv_group(in);
    // One unit at a time: a head, or a key-value head's group of heads as g * nq rows (TruthUnit).
    for (std::size_t u = 0; u < truth_units(in); ++u) {
        const TruthUnit unit(in, options.causal, u);
        const std::size_t head = unit.first_head(), rows = unit.rows();
        const std::vector<double> kt = transposed(k.data() + u * nk * d, nk, d);
        std::vector<char> decided(rows, 1);
        std::vector<RowState> states(options.backward ? rows : 0);
        // P's balls for dS, each row's for the keys it sees (a causal mask's half); delta alone
        // needs only O's
        std::vector<std::size_t> row_at(rows + 1, 0);
        for (std::size_t i = 0; i < rows; ++i) row_at[i + 1] = row_at[i] + unit.keys(i);
        std::vector<Ball> p(options.backward && options.gradients ? row_at[rows] : 0, dd::exact(0));
        for (std::size_t i = 0; i < states.size() && !p.empty(); ++i) states[i].p = p.data() + row_at[i];
        auto bias_row = [&](std::size_t i) { return unit.bias(i); };
        auto keys_of = [&](std::size_t i) { return unit.keys(i); };
        auto row_output = [&](std::size_t i) {
            return RowOutput{t.o.data() + (head * nq + i) * dv, t.lse.data() + head * nq + i,
                             options.intermediates ? t.s.data() + (head * nq + i) * nk : nullptr,
                             options.intermediates ? t.p.data() + (head * nq + i) * nk : nullptr};
        };
        parallel_for(rows, 4, options.threads, [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = begin; i < end; ++i) {
                decided[i] =
                    fast_row(q.data() + (head * nq + i) * d, kt.data(), v.data() + u * nk * dv, bias_row(i), nk,
                             keys_of(i), d, dv, t.scale, row_output(i), options.backward ? &states[i] : nullptr);
            }
        });
        if (options.backward) {
            const std::vector<double> vt = transposed(v.data() + u * nk * dv, nk, dv);
            const bool forward_decided = std::find(decided.begin(), decided.end(), 0) == decided.end();
            const HeadBackward hb{q.data() + head * nq * d,
                                  k.data() + u * nk * d,
                                  v.data() + u * nk * dv,
                                  d_o.data() + head * nq * dv,
                                  vt.data(),
                                  rows,
                                  nk,
                                  d,
                                  dv,
                                  t.scale,
                                  &states,
                                  &p,
                                  &row_at,
                                  keys_of,
                                  bias_row,
                                  &options,
                                  t.delta.data() + head * nq,
                                  t.dq.data() + head * nq * d,
                                  t.dk.data() + u * nk * d,
                                  t.dv.data() + u * nk * dv,
                                  &t.reference_rows};
            if (forward_decided && !options.gradients) {
                fast_delta(hb, options.threads);
                t.fast_heads += g;
                continue;
            }
            if (forward_decided && fast_backward(hb, options.key_gradients, options.threads)) {
                t.fast_heads += g;
                continue;
            }
            // The whole unit from the reference (rare: an output the balls cannot decide).
            const emu::AttentionInputs one = emu::group_inputs(in, u);
            const AttentionTruth r = attention_truth_reference(one, options);
            auto put = [](const std::vector<double>& from, std::vector<double>& to, std::size_t at) {
                std::copy(from.begin(), from.end(), to.begin() + static_cast<std::ptrdiff_t>(at));
            };
            put(r.o, t.o, head * nq * dv), put(r.lse, t.lse, head * nq), put(r.delta, t.delta, head * nq);
            put(r.dq, t.dq, head * nq * d), put(r.dk, t.dk, u * nk * d), put(r.dv, t.dv, u * nk * dv);
            if (options.intermediates) put(r.s, t.s, head * nq * nk), put(r.p, t.p, head * nq * nk);
            t.reference_rows += rows;
            t.max_precision_used = std::max(t.max_precision_used, r.max_precision_used);
            continue;
        }
        // Rows with an undecided output: the reference, row by row (rare; bench_truth counts them).
        std::vector<std::size_t> undecided;
        for (std::size_t i = 0; i < rows; ++i) {
            if (!decided[i]) undecided.push_back(i);
        }
        parallel_for(undecided.size(), 1, options.threads, [&](std::size_t begin, std::size_t end) {
            for (std::size_t r = begin; r < end; ++r) {
                const std::size_t i = undecided[r];
                const RowOutput out = row_output(i);
                reference_forward_row(q.data() + (head * nq + i) * d, k.data() + u * nk * d, v.data() + u * nk * dv,
                                      bias_row(i), keys_of(i), nk, d, dv, t.scale, options, out.o, out.lse, out.s,
                                      out.p);
            }
        });
        t.reference_rows += undecided.size();
        if (undecided.empty()) t.fast_heads += g;
    }
    drop_unasked(t, options);
    return t;
}

}  // namespace roundscope::analysis
