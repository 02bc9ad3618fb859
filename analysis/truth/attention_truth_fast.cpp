// The fast ground truth (forward): the reference's formulas in double-double balls
// (double_double.hpp), every output decided from its ball or, for the rare head where one is
// not, the whole head taken from the reference path. Same bits as attention_truth_reference
// (tests/analysis/test_truth_fast.cpp).
//
// Products of inputs with at most 26 significant bits (every format roundscope reads except
// f64) are exact in double, so S = scale * sum q k is a cascaded two-sum (Ogita, Rump and
// Oishi's Sum2) whose error is at most gamma_{n-1}^2 sum |q k|.
#include <mpfr.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "analysis/truth/attention_truth.hpp"
#include "analysis/truth/double_double.hpp"
#include "emu/tensor_decode.hpp"
#include "lib/error.hpp"
#include "lib/parallel.hpp"

namespace roundscope::analysis {
namespace {

using dd::Ball;

bool products_exact(const std::vector<double>& x) {
    for (const double v : x) {
        const std::uint64_t m = std::bit_cast<std::uint64_t>(v) & ((std::uint64_t{1} << 52) - 1);
        if (v != 0 && std::countr_zero(m | (std::uint64_t{1} << 52)) < 52 - 25) return false;
    }
    return true;
}

double gamma(double n) { return n * dd::u / (1 - n * dd::u); }

// scale * sum_t a[t] * b[t * stride] as a ball; every product exact.
Ball exact_products_dot(const double* a, const double* b, std::size_t stride, std::size_t n, double scale) {
    double s = 0, c = 0, magnitude = 0;
    for (std::size_t t = 0; t < n; ++t) {
        const double p = a[t] * b[t * stride];
        const dd::DD e = dd::two_sum(s, p);
        s = e.hi;
        c += e.lo;
        magnitude += std::fabs(p);
    }
    const double g = gamma(static_cast<double>(n));
    const Ball sum{dd::two_sum(s, c), dd::up(g * g * magnitude * (1 + 2 * gamma(static_cast<double>(n))))};
    return dd::mul(sum, scale);
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

// Head `head` of a [.., N, D] tensor as its own [N, D] tensor.
Tensor slice_head(const Tensor& t, std::size_t head) {
    const Shape& s = t.shape();
    const std::uint64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
    Tensor out = Tensor::zeros(t.name(), t.dtype(), {rows, cols});
    for (std::uint64_t i = 0; i < rows * cols; ++i) out.set_bits_at(i, t.bits_at(head * rows * cols + i));
    return out;
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

// One query row; false if an output cannot be decided from its ball.
bool fast_row(const double* q, const double* kt, const double* v, std::size_t n_kv, std::size_t keys, std::size_t d,
              std::size_t dv, double scale, const RowOutput& out) {
    if (keys == 0) {
        for (std::size_t c = 0; c < dv; ++c) out.o[c] = 0;
        *out.lse = -std::numeric_limits<double>::infinity();
        if (out.p != nullptr) {
            for (std::size_t j = 0; j < n_kv; ++j) out.s[j] = out.p[j] = 0;
        }
        return true;
    }
    std::vector<Ball> s(keys), e(keys);
    std::vector<char> tiny(keys, 0);
    double shift = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < keys; ++j) {
        s[j] = exact_products_dot(q, kt + j, n_kv, d, scale);
        shift = std::max(shift, s[j].v.hi);
    }
    Ball l = dd::exact(0);
    for (std::size_t j = 0; j < keys; ++j) {
        const Ball x = dd::add(s[j], dd::exact(-shift));
        if (x.v.hi + x.r < -600) {
            tiny[j] = 1;  // e^x < 2^-865: only its bound enters the sums
            e[j] = {{0, 0}, exp_upper_bound(x.v.hi + x.r)};
        } else {
            e[j] = dd::exp(x);
        }
        l = dd::add(l, e[j]);
    }
    // 1 / l and log l from the interval of l, in MPFR (once per row).
    mpfr_t lo, hi;
    mpfr_inits2(160, lo, hi, static_cast<mpfr_ptr>(nullptr));
    ball_bounds(l, lo, hi);
    mpfr_t log_lo, log_hi;
    mpfr_inits2(160, log_lo, log_hi, static_cast<mpfr_ptr>(nullptr));
    mpfr_log(log_lo, lo, MPFR_RNDD);
    mpfr_log(log_hi, hi, MPFR_RNDU);
    mpfr_add_d(log_lo, log_lo, shift, MPFR_RNDD);
    mpfr_add_d(log_hi, log_hi, shift, MPFR_RNDU);
    const double lse_lo = mpfr_get_d(log_lo, MPFR_RNDN), lse_hi = mpfr_get_d(log_hi, MPFR_RNDN);
    mpfr_ui_div(log_lo, 1, hi, MPFR_RNDD);
    mpfr_ui_div(log_hi, 1, lo, MPFR_RNDU);
    const Ball inverse_l = ball_of(log_lo, log_hi);
    mpfr_clears(lo, hi, log_lo, log_hi, static_cast<mpfr_ptr>(nullptr));
    if (keys == 1) {
        // One key: P = 1 and LSE = S exactly (the interval of log l would be absolute, not
        // relative, and fail to decide an LSE near 0).
        if (!dd::round_to_double(s[0], *out.lse)) return false;
    } else {
        if (lse_lo != lse_hi) return false;
        *out.lse = lse_lo;
    }

    for (std::size_t c = 0; c < dv; ++c) {
        Ball numerator = dd::exact(0);
        for (std::size_t j = 0; j < keys; ++j) numerator = dd::add(numerator, dd::mul(e[j], v[j * dv + c]));
        if (!dd::round_to_double(dd::mul(numerator, inverse_l), out.o[c])) {
            // An O of zero or below 2^-1020 is left to the reference.
            return false;
        }
    }
    if (out.p != nullptr) {
        for (std::size_t j = 0; j < n_kv; ++j) {
            if (j >= keys) {
                out.s[j] = out.p[j] = 0;
                continue;
            }
            if (!dd::round_to_double(s[j], out.s[j])) return false;
            const Ball p = dd::mul(e[j], inverse_l);
            if (tiny[j]) {
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

}  // namespace

AttentionTruth attention_truth(const AttentionInputs& in, const TruthOptions& options) {
    if (options.backward) return attention_truth_reference(in, options);  // the fast backward is to come
    const std::vector<double> q = emu::decode_tensor<double>(in.q), k = emu::decode_tensor<double>(in.k),
                              v = emu::decode_tensor<double>(in.v);
    for (const auto* x : {&q, &k, &v}) {
        for (const double y : *x) {
            if (!std::isfinite(y)) return attention_truth_reference(in, options);  // which names the tensor
        }
    }
    if (!products_exact(q) || !products_exact(k)) return attention_truth_reference(in, options);

    AttentionTruth t;
    t.heads = in.batch * in.heads;
    t.n_q = in.n_q, t.n_kv = in.n_kv, t.d = in.d, t.d_v = in.d_v;
    t.causal = options.causal;
    t.scale = options.scale != 0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(in.d));
    const std::size_t nq = t.n_q, nk = t.n_kv, d = t.d, dv = t.d_v;
    t.o.assign(t.heads * nq * dv, 0);
    t.lse.assign(t.heads * nq, 0);
    if (options.intermediates) {
        t.s.assign(t.heads * nq * nk, 0);
        t.p.assign(t.heads * nq * nk, 0);
    }
    const auto offset = static_cast<std::int64_t>(nk) - static_cast<std::int64_t>(nq);
    for (std::size_t head = 0; head < t.heads; ++head) {
        std::vector<double> kt(d * nk);  // K transposed: the dot products walk it with stride n_kv
        for (std::size_t j = 0; j < nk; ++j) {
            for (std::size_t c = 0; c < d; ++c) kt[c * nk + j] = k[head * nk * d + j * d + c];
        }
        std::vector<char> decided(nq, 1);
        parallel_for(nq, 4, options.threads, [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = begin; i < end; ++i) {
                std::int64_t keys = static_cast<std::int64_t>(nk);
                if (options.causal) keys = std::clamp<std::int64_t>(static_cast<std::int64_t>(i) + offset + 1, 0, keys);
                const RowOutput out{t.o.data() + (head * nq + i) * dv, t.lse.data() + head * nq + i,
                                    options.intermediates ? t.s.data() + (head * nq + i) * nk : nullptr,
                                    options.intermediates ? t.p.data() + (head * nq + i) * nk : nullptr};
                decided[i] = fast_row(q.data() + (head * nq + i) * d, kt.data(), v.data() + head * nk * dv, nk,
                                      static_cast<std::size_t>(keys), d, dv, t.scale, out);
            }
        });
        if (std::find(decided.begin(), decided.end(), 0) == decided.end()) {
            ++t.fast_heads;
            continue;
        }
        // The reference for this head alone.
        AttentionInputs one = in;
        one.batch = 1, one.heads = 1;
        one.q = slice_head(in.q, head), one.k = slice_head(in.k, head), one.v = slice_head(in.v, head);
        const AttentionTruth r = attention_truth_reference(one, options);
        std::copy(r.o.begin(), r.o.end(), t.o.begin() + static_cast<std::ptrdiff_t>(head * nq * dv));
        std::copy(r.lse.begin(), r.lse.end(), t.lse.begin() + static_cast<std::ptrdiff_t>(head * nq));
        if (options.intermediates) {
            std::copy(r.s.begin(), r.s.end(), t.s.begin() + static_cast<std::ptrdiff_t>(head * nq * nk));
            std::copy(r.p.begin(), r.p.end(), t.p.begin() + static_cast<std::ptrdiff_t>(head * nq * nk));
        }
        t.max_precision_used = std::max(t.max_precision_used, r.max_precision_used);
    }
    return t;
}

}  // namespace roundscope::analysis
