// The reference ground truth: interval arithmetic at a precision that is raised until every
// output is decided. Deliberately plain: one loop per formula of attention_truth.hpp.
#include <fmt/format.h>
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "analysis/truth/attention_truth.hpp"
#include "analysis/truth/interval.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "lib/error.hpp"
#include "lib/parallel.hpp"

namespace roundscope::analysis {
namespace {

// The decoded inputs of one unit (a head, or a key-value head's group), row-major.
struct Head {
    const double* q;        // [n_q][d]
    const double* k;        // [n_kv][d]
    const double* v;        // [n_kv][d_v]
    const double* d_o;      // [n_q][d_v] or nullptr
    const TruthUnit* unit;  // the rows' keys and bias
};

struct Shape {
    std::int64_t n_q, n_kv, d, d_v;  // n_q: the unit's rows
    double scale;
    double softcap = 0;  // scores softcap tanh(s / softcap) before the bias (0: none)
};

// Interval enclosing  factor * sum_t a[t] * b[t * stride]: the products are exact at 192 bits
// (three doubles need at most 159), and mpfr_sum rounds their exact sum down and up.
void exact_dot(Interval& out, double factor, const double* a, const double* b, std::int64_t stride, std::int64_t n) {
    std::vector<mpfr_t> terms(static_cast<std::size_t>(n));
    std::vector<mpfr_ptr> pointers(terms.size());
    for (std::int64_t t = 0; t < n; ++t) {
        mpfr_init2(terms[t], 192);
        mpfr_set_d(terms[t], a[t], MPFR_RNDN);  // exact
        mpfr_mul_d(terms[t], terms[t], b[t * stride], MPFR_RNDN);
        mpfr_mul_d(terms[t], terms[t], factor, MPFR_RNDN);
        pointers[static_cast<std::size_t>(t)] = terms[t];
    }
    const mpfr_prec_t precision = mpfi_get_prec(out.get());
    mpfr_t lo, hi;
    mpfr_init2(lo, precision);
    mpfr_init2(hi, precision);
    mpfr_sum(lo, pointers.data(), static_cast<unsigned long>(n), MPFR_RNDD);
    mpfr_sum(hi, pointers.data(), static_cast<unsigned long>(n), MPFR_RNDU);
    mpfi_interv_fr(out.get(), lo, hi);
    mpfr_clear(lo);
    mpfr_clear(hi);
    for (auto& t : terms) mpfr_clear(t);
}

std::vector<Interval> intervals(std::size_t n, int precision) {
    std::vector<Interval> out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) out.emplace_back(precision);
    return out;
}

// Rounds every interval of `from` into `to`; false if one is undecided.
bool round_all(const std::vector<Interval>& from, double* to) {
    for (std::size_t i = 0; i < from.size(); ++i) {
        const std::optional<double> x = from[i].rounded();
        if (!x) return false;
        to[i] = *x;
    }
    return true;
}

// One query row of the forward pass: S, P (the first `keys` entries), O and LSE as intervals.
// bias (null: none) adds to each score; a key whose bias is -inf is masked: S = -inf, P = 0.
// A row without keys keeps O = 0 and gets LSE = -inf.
void forward_row(const double* q, const double* k, const double* v, const double* bias, std::size_t keys,
                 const Shape& sh, Interval* S, Interval* P, Interval* O, Interval& lse) {
    const mpfr_prec_t precision = mpfi_get_prec(lse.get());
    const auto d = static_cast<std::size_t>(sh.d), dv = static_cast<std::size_t>(sh.d_v);
    constexpr double minus_inf = -std::numeric_limits<double>::infinity();
    auto masked = [&](std::size_t j) { return bias != nullptr && bias[j] == minus_inf; };
    Interval sum(precision), term(precision);
    // The shift is any point (it cancels); the exact score of the key with the largest one keeps
    // exp in range and makes that key's exp(S - shift) exactly 1. A row with one key then has
    // P = 1, O = V and LSE = S exactly, so delta = rowsum(dO * V) is an exact sum that Ziv's test
    // can round even where it is a tie between two doubles (an interval around a tie never is).
    std::size_t largest = keys;
    double largest_mid = minus_inf;
    for (std::size_t j = 0; j < keys; ++j) {
        if (masked(j)) {
            mpfi_set_d(S[j].get(), minus_inf);
            continue;
        }
        exact_dot(S[j], sh.scale, q, k + j * d, 1, sh.d);
        if (sh.softcap != 0) {  // Gemma 2's order: scale, cap, then the mask
            mpfi_div_d(S[j].get(), S[j].get(), sh.softcap);
            mpfi_tanh(S[j].get(), S[j].get());
            mpfi_mul_d(S[j].get(), S[j].get(), sh.softcap);
        }
        if (bias != nullptr) mpfi_add_d(S[j].get(), S[j].get(), bias[j]);
        mpfr_t mid;
        mpfr_init2(mid, precision);
        mpfi_mid(mid, S[j].get());
        const double m = mpfr_get_d(mid, MPFR_RNDN);
        if (largest == keys || m > largest_mid) largest = j, largest_mid = m;
        mpfr_clear(mid);
    }
    if (largest == keys) {  // no key, or every key masked
        mpfi_set_d(lse.get(), minus_inf);
        return;
    }
    mpfr_t shift;
    mpfr_init2(shift, precision);
    mpfi_get_left(shift, S[largest].get());
    for (std::size_t j = 0; j < keys; ++j) {
        if (masked(j)) continue;
        mpfi_sub_fr(P[j].get(), S[j].get(), shift);
        mpfi_exp(P[j].get(), P[j].get());
        mpfi_add(sum.get(), sum.get(), P[j].get());
    }
    for (std::size_t j = 0; j < keys; ++j) mpfi_div(P[j].get(), P[j].get(), sum.get());
    mpfi_log(lse.get(), sum.get());
    mpfi_add_fr(lse.get(), lse.get(), shift);
    mpfr_clear(shift);
    for (std::size_t c = 0; c < dv; ++c) {
        for (std::size_t j = 0; j < keys; ++j) {
            mpfi_mul_d(term.get(), P[j].get(), v[j * dv + c]);
            mpfi_add(O[c].get(), O[c].get(), term.get());
        }
    }
}

// One query row of the backward pass by rows, from its O, P and S: delta = rowsum(dO * O), dS =
// P (dP - delta) for its `keys` keys (under a soft cap times its derivative 1 - tanh^2, tanh
// from S less the bias) and dQ = scale dS K.
void backward_row(const double* d_o, const double* k, const double* v, const double* bias, std::size_t keys,
                  const Shape& sh, const Interval* O, const Interval* P, const Interval* S, Interval& delta,
                  Interval* dS, Interval* dQ) {
    const auto d = static_cast<std::size_t>(sh.d), dv = static_cast<std::size_t>(sh.d_v);
    const mpfr_prec_t precision = mpfi_get_prec(delta.get());
    Interval dp(precision), term(precision);
    for (std::size_t c = 0; c < dv; ++c) {
        mpfi_mul_d(term.get(), O[c].get(), d_o[c]);
        mpfi_add(delta.get(), delta.get(), term.get());
    }
    for (std::size_t j = 0; j < keys; ++j) {
        exact_dot(dp, 1.0, d_o, v + j * dv, 1, sh.d_v);
        mpfi_sub(dp.get(), dp.get(), delta.get());
        mpfi_mul(dS[j].get(), P[j].get(), dp.get());
        if (sh.softcap != 0 && !mpfi_is_zero(P[j].get())) {
            if (bias != nullptr)
                mpfi_sub_d(term.get(), S[j].get(), bias[j]);
            else
                mpfi_set(term.get(), S[j].get());
            mpfi_div_d(term.get(), term.get(), sh.softcap);  // tanh
            mpfi_sqr(term.get(), term.get());
            mpfi_d_sub(term.get(), 1.0, term.get());
            mpfi_mul(dS[j].get(), dS[j].get(), term.get());
        }
    }
    for (std::size_t c = 0; c < d; ++c) {
        for (std::size_t j = 0; j < keys; ++j) {
            mpfi_mul_d(term.get(), dS[j].get(), k[j * d + c]);
            mpfi_add(dQ[c].get(), dQ[c].get(), term.get());
        }
        mpfi_mul_d(dQ[c].get(), dQ[c].get(), sh.scale);
    }
}

struct HeadOutput {
    double *o, *lse, *delta, *dq, *dk, *dv, *s, *p;  // null where not wanted
};

// One head at `precision` bits; false if some output is not decided at that precision.
bool head_truth(const Head& h, const Shape& sh, int precision, const HeadOutput& out, int threads) {
    const auto nq = static_cast<std::size_t>(sh.n_q), nk = static_cast<std::size_t>(sh.n_kv);
    const auto dv = static_cast<std::size_t>(sh.d_v), d = static_cast<std::size_t>(sh.d);
    std::vector<Interval> S = intervals(nq * nk, precision), P = intervals(nq * nk, precision);
    std::vector<Interval> O = intervals(nq * dv, precision), lse = intervals(nq, precision);

    // Forward, row by row.
    parallel_for(nq, 1, threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) {
            forward_row(h.q + i * d, h.k, h.v, h.unit->bias(i), h.unit->keys(i), sh, &S[i * nk], &P[i * nk], &O[i * dv],
                        lse[i]);
        }
    });
    bool ok = round_all(O, out.o) && round_all(lse, out.lse);
    if (out.s != nullptr) ok = ok && round_all(S, out.s) && round_all(P, out.p);
    if (!ok || out.dq == nullptr) return ok;

    // Backward: dS row by row, then dQ by rows and dK, dV by columns, each sum in a fixed order.
    std::vector<Interval> dS = intervals(nq * nk, precision), delta = intervals(nq, precision);
    std::vector<Interval> dQ = intervals(nq * d, precision), dK = intervals(nk * d, precision);
    std::vector<Interval> dV = intervals(nk * dv, precision);
    parallel_for(nq, 1, threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i)
            backward_row(h.d_o + i * dv, h.k, h.v, h.unit->bias(i), h.unit->keys(i), sh, &O[i * dv], &P[i * nk],
                         &S[i * nk], delta[i], &dS[i * nk], &dQ[i * d]);
    });
    parallel_for(nk, 1, threads, [&](std::size_t begin, std::size_t end) {
        Interval term(precision);
        for (std::size_t j = begin; j < end; ++j) {
            for (std::size_t i = 0; i < nq; ++i) {
                if (j >= h.unit->keys(i)) continue;
                for (std::size_t c = 0; c < dv; ++c) {
                    mpfi_mul_d(term.get(), P[i * nk + j].get(), h.d_o[i * dv + c]);
                    mpfi_add(dV[j * dv + c].get(), dV[j * dv + c].get(), term.get());
                }
                for (std::size_t c = 0; c < d; ++c) {
                    mpfi_mul_d(term.get(), dS[i * nk + j].get(), h.q[i * d + c]);
                    mpfi_add(dK[j * d + c].get(), dK[j * d + c].get(), term.get());
                }
            }
            for (std::size_t c = 0; c < d; ++c) mpfi_mul_d(dK[j * d + c].get(), dK[j * d + c].get(), sh.scale);
        }
    });
    return round_all(delta, out.delta) && round_all(dQ, out.dq) && round_all(dK, out.dk) && round_all(dV, out.dv);
}

}  // namespace

std::vector<double> decode_finite(const Tensor& t) {
    std::vector<double> x = emu::decode_tensor<double>(t);
    for (const double v : x) {
        if (!std::isfinite(v))
            throw Error(
                fmt::format("truth: tensor '{}' holds NaN or Inf; attention of it has no exact value", t.name()));
    }
    return x;
}

AttentionTruth empty_truth(const emu::AttentionInputs& in, const TruthOptions& options) {
    AttentionTruth t;
    t.heads = in.batch * in.heads;
    t.kv_heads = in.batch * emu::kv_head_count(in);
    t.n_q = in.n_q, t.n_kv = in.n_kv, t.d = in.d, t.d_v = in.d_v;
    t.causal = options.causal;
    t.scale = options.scale != 0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(in.d));
    const std::uint64_t nq = t.n_q, nk = t.n_kv, d = t.d, dv = t.d_v;
    t.o.assign(t.heads * nq * dv, 0);
    t.lse.assign(t.heads * nq, 0);
    if (options.backward) {
        t.delta.assign(t.heads * nq, 0);
        t.dq.assign(t.heads * nq * d, 0);
        t.dk.assign(t.kv_heads * nk * d, 0);
        t.dv.assign(t.kv_heads * nk * dv, 0);
    }
    if (options.intermediates) {
        t.s.assign(t.heads * nq * nk, 0);
        t.p.assign(t.heads * nq * nk, 0);
    }
    return t;
}

void drop_unasked(AttentionTruth& t, const TruthOptions& options) {
    if (options.backward && !options.gradients) t.dq.clear();  // delta alone
    if (options.backward && !(options.gradients && options.key_gradients)) t.dk.clear(), t.dv.clear();
}

AttentionTruth attention_truth_reference(const emu::AttentionInputs& in, const TruthOptions& options) {
    if (options.backward && !in.d_o) throw Error("the backward pass needs a tensor 'do' (dO)");
    if (in.query_rows && options.backward && options.gradients)
        throw Error("a sample of query rows has no dK and dV (they need every row): ask for delta alone");
    AttentionTruth t = empty_truth(in, options);
    const std::vector<double> q = decode_finite(in.q), k = decode_finite(in.k), v = decode_finite(in.v);
    const std::vector<double> d_o = options.backward ? decode_finite(*in.d_o) : std::vector<double>();
    const std::uint64_t nq = t.n_q, nk = t.n_kv, d = t.d, dv = t.d_v, g = emu::kv_group(in);
    const Shape shape{static_cast<std::int64_t>(g * nq),
                      static_cast<std::int64_t>(nk),
                      static_cast<std::int64_t>(d),
                      static_cast<std::int64_t>(dv),
                      t.scale,
                      in.softcap};
    for (std::uint64_t u = 0; u < truth_units(in); ++u) {
        const TruthUnit unit(in, options.causal, u);
        const std::uint64_t head = unit.first_head();  // its rows are the group's heads' rows, in order
        const Head h{q.data() + head * nq * d, k.data() + u * nk * d, v.data() + u * nk * dv,
                     options.backward ? d_o.data() + head * nq * dv : nullptr, &unit};
        auto at = [](std::vector<double>& x, std::uint64_t first) { return x.empty() ? nullptr : x.data() + first; };
        const HeadOutput out{at(t.o, head * nq * dv), at(t.lse, head * nq),   at(t.delta, head * nq),
                             at(t.dq, head * nq * d), at(t.dk, u * nk * d),   at(t.dv, u * nk * dv),
                             at(t.s, head * nq * nk), at(t.p, head * nq * nk)};
        int precision = options.precision;
        while (!head_truth(h, shape, precision, out, options.threads)) {
            if (2 * precision > options.max_precision) {
                throw Error(fmt::format("truth: head {}: an output is still undecided at {} bits", head, precision));
            }
            precision *= 2;
        }
        t.max_precision_used = std::max(t.max_precision_used, precision);
    }
    drop_unasked(t, options);
    return t;
}

void reference_forward_row(const double* q, const double* k, const double* v, const double* bias, std::size_t keys,
                           std::size_t n_kv, std::size_t d, std::size_t d_v, double scale, const TruthOptions& options,
                           double* o, double* lse, double* s, double* p) {
    const Shape sh{1, static_cast<std::int64_t>(n_kv), static_cast<std::int64_t>(d), static_cast<std::int64_t>(d_v),
                   scale};
    for (int precision = options.precision;; precision *= 2) {
        std::vector<Interval> S = intervals(n_kv, precision), P = intervals(n_kv, precision),
                              O = intervals(d_v, precision);
        Interval l(precision);
        forward_row(q, k, v, bias, keys, sh, S.data(), P.data(), O.data(), l);
        bool ok = round_all(O, o);
        if (ok) {
            const std::optional<double> x = l.rounded();
            ok = x.has_value();
            if (ok) *lse = *x;
        }
        if (ok && s != nullptr) ok = round_all(S, s) && round_all(P, p);
        if (ok) return;
        if (2 * precision > options.max_precision) {
            throw Error(fmt::format("truth: a row is still undecided at {} bits", precision));
        }
    }
}

void reference_backward_row(const double* q, const double* k, const double* v, const double* d_o, const double* bias,
                            std::size_t keys, std::size_t n_kv, std::size_t d, std::size_t d_v, double scale,
                            const TruthOptions& options, double* delta, double* dq) {
    const Shape sh{1, static_cast<std::int64_t>(n_kv), static_cast<std::int64_t>(d), static_cast<std::int64_t>(d_v),
                   scale};
    for (int precision = options.precision;; precision *= 2) {
        std::vector<Interval> S = intervals(n_kv, precision), P = intervals(n_kv, precision),
                              O = intervals(d_v, precision), dS = intervals(n_kv, precision),
                              dQ = intervals(d, precision);
        Interval l(precision), row_delta(precision);
        forward_row(q, k, v, bias, keys, sh, S.data(), P.data(), O.data(), l);
        backward_row(d_o, k, v, bias, keys, sh, O.data(), P.data(), S.data(), row_delta, dS.data(), dQ.data());
        const std::optional<double> x = row_delta.rounded();
        if (x && round_all(dQ, dq)) {
            *delta = *x;
            return;
        }
        if (2 * precision > options.max_precision) {
            throw Error(fmt::format("truth: a row's gradient is still undecided at {} bits", precision));
        }
    }
}

}  // namespace roundscope::analysis
