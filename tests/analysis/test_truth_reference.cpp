// The reference ground truth (analysis/truth): identities that the exact result satisfies,
// checked on its correctly rounded outputs within the bounds their roundings allow; finite
// differences of a scalar loss; a float64 implementation within its error bound; Ziv's
// escalation giving the same bits; bad inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "analysis/truth/attention_truth.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "emu/numbers/round.hpp"
#include "lib/error.hpp"

using namespace roundscope;
using namespace roundscope::analysis;

namespace {

constexpr double u = 0x1p-53;  // unit roundoff of float64

Tensor tensor_of(const std::string& name, DType dtype, Shape shape, const std::vector<double>& values) {
    Tensor t = Tensor::zeros(name, dtype, std::move(shape));
    const emu::Format& f = dtype == DType::f64 ? emu::f64 : emu::bf16;
    for (std::size_t i = 0; i < values.size(); ++i)
        t.set_bits_at(i, emu::cast_from_f64(values[i], f, emu::CastOptions{}));
    return t;
}

// One head: q [n, d], k [n, d], v [n, dv], do [n, dv], random Gaussians in bf16 (or f64).
emu::AttentionInputs random_head(std::int64_t n, std::int64_t d, std::int64_t dv, std::uint64_t seed, double spread = 1,
                                 DType dtype = DType::bf16) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g;
    auto draw = [&](std::int64_t count, double sd) {
        std::vector<double> x(static_cast<std::size_t>(count));
        for (auto& v : x) v = sd * g(rng);
        return x;
    };
    const auto un = static_cast<std::uint64_t>(n), ud = static_cast<std::uint64_t>(d),
               udv = static_cast<std::uint64_t>(dv);
    emu::AttentionInputs in;
    in.q = tensor_of("q", dtype, {un, ud}, draw(n * d, spread));
    in.k = tensor_of("k", dtype, {un, ud}, draw(n * d, spread));
    in.v = tensor_of("v", dtype, {un, udv}, draw(n * dv, 1));
    in.d_o = tensor_of("do", dtype, {un, udv}, draw(n * dv, 1));
    in.n_q = in.n_kv = un, in.d = ud, in.d_v = udv;
    return in;
}

// The same forward and backward outputs, bit for bit where they are not NaN.
void check_same_outputs(const AttentionTruth& a, const AttentionTruth& b) {
    CHECK(a.o == b.o);
    CHECK(a.lse == b.lse);
    CHECK(a.delta == b.delta);
    CHECK(a.dq == b.dq);
    CHECK(a.dk == b.dk);
    CHECK(a.dv == b.dv);
}

std::vector<double> values(const Tensor& t) {
    std::vector<double> x(t.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = emu::decode(emu::format_of(t.dtype()), t.bits_at(i));
    return x;
}

}  // namespace

TEST_CASE("Truth: rows of P sum to 1 and delta = rowsum(dO * O) = rowsum(P * dP), within the rounding bounds",
          "[truth][reference]") {
    const bool causal = GENERATE(false, true);
    const double spread = GENERATE(1.0, 6.0);  // 6: scores spread over hundreds: one dominates by 100+
    const emu::AttentionInputs in = random_head(24, 16, 8, 3, spread);
    TruthOptions o;
    o.causal = causal;
    o.backward = o.intermediates = true;
    const AttentionTruth t = attention_truth_reference(in, o);
    const std::vector<double> d_o = values(*in.d_o), v = values(in.v);
    const std::size_t n = t.n_q, dv = t.d_v;
    for (std::size_t i = 0; i < n; ++i) {
        long double sum = 0, a = 0, b = 0, bound_a = 0, bound_b = 0;
        for (std::size_t j = 0; j < n; ++j) sum += t.p[i * n + j];
        CHECK(std::abs(static_cast<double>(sum - 1)) <= u + 0x1p-60);
        for (std::size_t c = 0; c < dv; ++c) {
            a += static_cast<long double>(d_o[i * dv + c]) * t.o[i * dv + c];
            bound_a += std::abs(d_o[i * dv + c] * t.o[i * dv + c]) * u;
        }
        for (std::size_t j = 0; j < n; ++j) {
            long double dp = 0;
            for (std::size_t c = 0; c < dv; ++c) dp += static_cast<long double>(d_o[i * dv + c]) * v[j * dv + c];
            b += t.p[i * n + j] * dp;
            bound_b += std::abs(static_cast<double>(t.p[i * n + j] * dp)) * u;
        }
        const double slack = std::abs(t.delta[i]) * u + 0x1p-60;
        CHECK(std::abs(static_cast<double>(a) - t.delta[i]) <= static_cast<double>(bound_a) + slack);
        CHECK(std::abs(static_cast<double>(b) - t.delta[i]) <= static_cast<double>(bound_b) + slack);
    }
    if (causal) {  // the first query sees only the first key: O = v[0] exactly, P = 1
        CHECK(t.p[0] == 1.0);
        for (std::size_t c = 0; c < dv; ++c) CHECK(t.o[c] == v[c]);
    }
}

TEST_CASE("Truth: dQ, dK and dV are the derivatives of sum(dO * O)", "[truth][reference]") {
    const emu::AttentionInputs base = random_head(6, 4, 3, 11, 1, DType::f64);
    TruthOptions o;
    o.backward = true;
    const AttentionTruth t = attention_truth_reference(base, o);
    auto loss = [&](const emu::AttentionInputs& in) {
        TruthOptions forward;
        forward.scale = t.scale;
        const AttentionTruth f = attention_truth_reference(in, forward);
        const std::vector<double> d_o = values(*in.d_o);
        long double l = 0;
        for (std::size_t i = 0; i < f.o.size(); ++i) l += static_cast<long double>(d_o[i]) * f.o[i];
        return static_cast<double>(l);
    };
    struct Case {
        Tensor emu::AttentionInputs::*tensor;
        const std::vector<double>* gradient;
    };
    for (const Case c : {Case{&emu::AttentionInputs::q, &t.dq}, Case{&emu::AttentionInputs::k, &t.dk},
                         Case{&emu::AttentionInputs::v, &t.dv}}) {
        const std::vector<double> x = values(base.*c.tensor);
        for (std::size_t e = 0; e < x.size(); ++e) {
            const double h = 0x1p-12;
            // Tensors share their bytes when copied: build new ones.
            emu::AttentionInputs up = base, down = base;
            std::vector<double> moved = x;
            moved[e] = x[e] + h;
            up.*c.tensor = tensor_of((base.*c.tensor).name(), DType::f64, (base.*c.tensor).shape(), moved);
            moved[e] = x[e] - h;
            down.*c.tensor = tensor_of((base.*c.tensor).name(), DType::f64, (base.*c.tensor).shape(), moved);
            const double numeric = (loss(up) - loss(down)) / (2 * h);
            INFO((base.*c.tensor).name() << "[" << e << "]");
            CHECK(numeric == Approx((*c.gradient)[e]).epsilon(1e-6).margin(1e-9));
        }
    }
}

TEST_CASE("Truth: a float64 implementation lies within its error bound", "[truth][reference]") {
    const emu::AttentionInputs in = random_head(32, 16, 8, 5, 2);
    TruthOptions o;
    const AttentionTruth t = attention_truth_reference(in, o);
    const std::vector<double> q = values(in.q), k = values(in.k), v = values(in.v);
    const std::size_t n = 32, d = 16, dv = 8;
    for (std::size_t i = 0; i < n; ++i) {
        std::vector<double> s(n), p(n);
        double m = -INFINITY, max_score_error = 0;
        for (std::size_t j = 0; j < n; ++j) {
            double dot = 0, magnitude = 0;
            for (std::size_t c = 0; c < d; ++c) {
                dot += q[i * d + c] * k[j * d + c];
                magnitude += std::abs(q[i * d + c] * k[j * d + c]);
            }
            s[j] = t.scale * dot;
            max_score_error = std::max(max_score_error, (d + 2) * u * t.scale * magnitude);  // gamma_d plus the scaling
            m = std::max(m, s[j]);
        }
        double l = 0;
        for (std::size_t j = 0; j < n; ++j) l += p[j] = std::exp(s[j] - m);
        for (std::size_t c = 0; c < dv; ++c) {
            double o64 = 0, magnitude = 0;
            for (std::size_t j = 0; j < n; ++j) {
                o64 += p[j] / l * v[j * dv + c];
                magnitude += p[j] / l * std::abs(v[j * dv + c]);
            }
            // Each P is off by at most a factor exp(2 max_score_error) (1 + (n + 8) u); O adds n u.
            const double bound = (std::expm1(4 * max_score_error) + (2 * n + 10) * u) * magnitude;
            CHECK(std::abs(o64 - t.o[i * dv + c]) <= bound);
        }
    }
}

TEST_CASE("Truth: Ziv's escalation from 24 bits gives the bits of 256", "[truth][reference]") {
    const emu::AttentionInputs in = random_head(16, 8, 8, 9);
    TruthOptions low, high;
    low.backward = high.backward = true;
    low.precision = 24;
    const AttentionTruth a = attention_truth_reference(in, low), b = attention_truth_reference(in, high);
    CHECK(a.max_precision_used > 24);
    check_same_outputs(a, b);
}

TEST_CASE("Truth: repeated maxima, and NaN inputs refused", "[truth][reference]") {
    emu::AttentionInputs in = random_head(8, 4, 4, 2);
    // Every key the same: every row of P is exactly 1/8, O the mean of V (exact in double).
    for (std::uint64_t j = 1; j < 8; ++j) {
        for (std::uint64_t c = 0; c < 4; ++c) in.k.set_bits_at(j * 4 + c, in.k.bits_at(c));
    }
    TruthOptions o;
    o.intermediates = true;
    const AttentionTruth t = attention_truth_reference(in, o);
    const std::vector<double> v = values(in.v);
    for (const double p : t.p) CHECK(p == 0.125);
    for (std::size_t c = 0; c < 4; ++c) {
        double mean = 0;
        for (std::size_t j = 0; j < 8; ++j) mean += v[j * 4 + c];
        CHECK(t.o[c] == mean / 8);
    }
    in.q.set_bits_at(3, 0x7FC0);  // bf16 NaN
    CHECK_THROWS_AS(attention_truth_reference(in, o), Error);
}

namespace {

// A [n_q, n_kv] bias tensor (f64: every value exact, -inf included) from f(i, j).
template <class F>
void set_bias(emu::AttentionInputs& in, F f) {
    std::vector<double> b(in.n_q * in.n_kv);
    for (std::uint64_t i = 0; i < in.n_q; ++i) {
        for (std::uint64_t j = 0; j < in.n_kv; ++j) b[i * in.n_kv + j] = f(i, j);
    }
    in.mask.dense.assign(1, emu::DenseMask(tensor_of("bias", DType::f64, {in.n_q, in.n_kv}, b), in.batch, in.heads,
                                           in.n_q, in.n_kv, "tensor 'bias'"));
}

// The keys of `in` without key `drop` (k, v, and the bias's column when there is one).
emu::AttentionInputs without_key(const emu::AttentionInputs& in, std::uint64_t drop) {
    auto remove_row = [&](const Tensor& t, std::uint64_t width) {
        std::vector<double> x = values(t);
        x.erase(x.begin() + static_cast<std::ptrdiff_t>(drop * width),
                x.begin() + static_cast<std::ptrdiff_t>((drop + 1) * width));
        return tensor_of(t.name(), t.dtype(), {in.n_kv - 1, width}, x);
    };
    emu::AttentionInputs out = in;
    out.k = remove_row(in.k, in.d), out.v = remove_row(in.v, in.d_v);
    out.n_kv = in.n_kv - 1;
    out.mask.dense.clear();
    return out;
}

constexpr double minus_inf = -std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("Truth with a bias: a -inf mask is the causal mask, and a masked key is a missing key",
          "[truth][reference]") {
    const emu::AttentionInputs plain = random_head(12, 8, 4, 31);
    TruthOptions o;
    o.backward = true;
    emu::AttentionInputs masked = plain;
    set_bias(masked, [](std::uint64_t i, std::uint64_t j) { return j > i ? minus_inf : 0.0; });
    TruthOptions causal = o;
    causal.causal = true;
    check_same_outputs(attention_truth_reference(masked, o), attention_truth_reference(plain, causal));

    // Key 5 masked for every query: the same bits as without key 5, which gets zero gradients.
    emu::AttentionInputs drop5 = plain;
    set_bias(drop5, [](std::uint64_t, std::uint64_t j) { return j == 5 ? minus_inf : 0.0; });
    const AttentionTruth c = attention_truth_reference(drop5, o),
                         d = attention_truth_reference(without_key(plain, 5), o);
    CHECK(c.o == d.o);
    CHECK(c.lse == d.lse);
    CHECK(c.dq == d.dq);
    for (std::uint64_t j = 0, k = 0; j < plain.n_kv; ++j) {
        for (std::uint64_t x = 0; x < plain.d; ++x)
            CHECK(c.dk[j * plain.d + x] == (j == 5 ? 0.0 : d.dk[k * plain.d + x]));
        for (std::uint64_t x = 0; x < plain.d_v; ++x)
            CHECK(c.dv[j * plain.d_v + x] == (j == 5 ? 0.0 : d.dv[k * plain.d_v + x]));
        if (j != 5) ++k;
    }
    o.intermediates = true;
    const AttentionTruth e = attention_truth_reference(drop5, o);
    for (std::uint64_t i = 0; i < plain.n_q; ++i) {
        CHECK(e.s[i * plain.n_kv + 5] == minus_inf);
        CHECK(e.p[i * plain.n_kv + 5] == 0);
    }
}

TEST_CASE("Truth with a bias: a constant per row leaves P, O and the gradients unchanged and shifts LSE",
          "[truth][reference]") {
    const emu::AttentionInputs plain = random_head(10, 8, 8, 37);
    emu::AttentionInputs shifted = plain;
    set_bias(shifted, [](std::uint64_t i, std::uint64_t) { return 37.3 * static_cast<double>(i) - 100.0; });
    TruthOptions o;
    o.backward = true;
    o.intermediates = true;
    const AttentionTruth a = attention_truth_reference(shifted, o), b = attention_truth_reference(plain, o);
    CHECK(a.p == b.p);
    CHECK(a.o == b.o);
    CHECK(a.delta == b.delta);
    CHECK((a.dq == b.dq && a.dk == b.dk && a.dv == b.dv));
    for (std::uint64_t i = 0; i < plain.n_q; ++i) {
        const double c = 37.3 * static_cast<double>(i) - 100.0;
        // both LSEs are correctly rounded, c is exact: they differ from a.lse - c by at most
        // half an ulp each, and the subtraction rounds once more
        CHECK(std::fabs(a.lse[i] - c - b.lse[i]) <= 2 * u * (std::fabs(a.lse[i]) + std::fabs(b.lse[i]) + std::fabs(c)));
        CHECK(a.s[i * plain.n_kv] != b.s[i * plain.n_kv]);
    }
}

TEST_CASE("Truth with a bias: NaN or +inf in it is refused, naming the tensor", "[truth][reference]") {
    emu::AttentionInputs in = random_head(4, 4, 4, 3);
    for (const double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
        set_bias(in, [bad](std::uint64_t i, std::uint64_t j) { return i == 2 && j == 1 ? bad : 0.0; });
        CHECK_THROWS_WITH(attention_truth_reference(in, TruthOptions{}), Catch::Contains("tensor 'bias'"));
        CHECK_THROWS_WITH(attention_truth(in, TruthOptions{}), Catch::Contains("tensor 'bias'"));
    }
}

TEST_CASE("Truth: a row with one key has P = 1 exactly, so a tie in delta is rounded to even, not left undecided",
          "[truth][reference]") {
    // One query, one key (the first row of every causal head): delta = rowsum(dO * V) exactly.
    // v = (1 + 2^-52, 2^-53), dO = (1, 1): delta = 1 + 3 * 2^-53, halfway between 1 + 2^-52 and
    // 1 + 2^-51; ties-to-even gives 1 + 2^-51. v = (1, 2^-53): halfway between 1 and 1 + 2^-52,
    // which gives 1.
    for (const auto& [v0, want] : {std::pair{1 + 0x1p-52, 1 + 0x1p-51}, std::pair{1.0, 1.0}}) {
        emu::AttentionInputs in;
        in.q = tensor_of("q", DType::f64, {1, 2}, {0.75, -0.5});
        in.k = tensor_of("k", DType::f64, {1, 2}, {1.5, 2});
        in.v = tensor_of("v", DType::f64, {1, 2}, {v0, 0x1p-53});
        in.d_o = tensor_of("do", DType::f64, {1, 2}, {1, 1});
        in.n_q = in.n_kv = 1, in.d = in.d_v = 2;
        TruthOptions o;
        o.backward = true;
        const AttentionTruth t = attention_truth(in, o);
        CHECK(t.delta[0] == want);
        CHECK(t.o == std::vector<double>{v0, 0x1p-53});
        CHECK(t.lse[0] == 0.125 * (1.0 / std::sqrt(2.0)));  // S = scale q.k, exact: 0.125 times the scale
        CHECK(t.dq == std::vector<double>{0, 0});
        CHECK(t.dk == std::vector<double>{0, 0});
        CHECK(t.dv == std::vector<double>{1, 1});
    }
    // The same tie behind a score that is not a double (q.k = (1 + 2^-30)^2 needs 61 bits): the
    // shift must be the exact score, not a double near it, for P to be exactly 1.
    {
        emu::AttentionInputs in;
        in.q = tensor_of("q", DType::f64, {1, 2}, {1 + 0x1p-30, 0});
        in.k = tensor_of("k", DType::f64, {1, 2}, {1 + 0x1p-30, 0});
        in.v = tensor_of("v", DType::f64, {1, 2}, {1 + 0x1p-52, 0x1p-53});
        in.d_o = tensor_of("do", DType::f64, {1, 2}, {1, 1});
        in.n_q = in.n_kv = 1, in.d = in.d_v = 2;
        TruthOptions o;
        o.backward = true;
        const AttentionTruth t = attention_truth(in, o);
        CHECK(t.delta[0] == 1 + 0x1p-51);
        CHECK(t.dq == std::vector<double>{0, 0});
    }
    // Every key the same: P = 1/N and dQ = scale K^T (P * (dP - delta)) = 0 exactly. With the
    // max's own score as the shift, exp(0) = 1 exactly and dQ's interval closes on 0.
    emu::AttentionInputs in = random_head(12, 4, 4, 5, 1, DType::f64);
    std::vector<double> k(48);
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = 0.25 * static_cast<double>(i % 4) - 0.375;
    in.k = tensor_of("k", DType::f64, {12, 4}, k);
    TruthOptions o;
    o.backward = true;
    const AttentionTruth t = attention_truth(in, o);
    CHECK(t.dq == std::vector<double>(48, 0.0));
}
