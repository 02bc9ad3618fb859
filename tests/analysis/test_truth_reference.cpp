// The reference ground truth (analysis/truth): identities that the exact result satisfies,
// checked on its correctly rounded outputs within the bounds their roundings allow; finite
// differences of a scalar loss; a float64 implementation within its error bound; Ziv's
// escalation giving the same bits; bad inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "analysis/truth/attention_truth.hpp"
#include "emu/round.hpp"
#include "emu/tensor_decode.hpp"
#include "lib/error.hpp"

using namespace roundscope;
using namespace roundscope::analysis;

namespace {

constexpr double u = 0x1p-53;  // unit roundoff of float64

Tensor tensor_of(const std::string& name, DType dtype, Shape shape, const std::vector<double>& values) {
    Tensor t = Tensor::zeros(name, dtype, std::move(shape));
    const emu::Format& f = dtype == DType::f64 ? emu::f64 : emu::bf16;
    for (std::size_t i = 0; i < values.size(); ++i) t.set_bits_at(i, emu::cast_from_f64(values[i], f, emu::CastOptions{}));
    return t;
}

// One head: q [n, d], k [n, d], v [n, dv], do [n, dv], random Gaussians in bf16 (or f64).
AttentionInputs random_head(std::int64_t n, std::int64_t d, std::int64_t dv, std::uint64_t seed, double spread = 1,
                            DType dtype = DType::bf16) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g;
    auto draw = [&](std::int64_t count, double sd) {
        std::vector<double> x(static_cast<std::size_t>(count));
        for (auto& v : x) v = sd * g(rng);
        return x;
    };
    const auto un = static_cast<std::uint64_t>(n), ud = static_cast<std::uint64_t>(d), udv = static_cast<std::uint64_t>(dv);
    AttentionInputs in;
    in.q = tensor_of("q", dtype, {un, ud}, draw(n * d, spread));
    in.k = tensor_of("k", dtype, {un, ud}, draw(n * d, spread));
    in.v = tensor_of("v", dtype, {un, udv}, draw(n * dv, 1));
    in.d_o = tensor_of("do", dtype, {un, udv}, draw(n * dv, 1));
    in.n_q = in.n_kv = un, in.d = ud, in.d_v = udv;
    return in;
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
    const AttentionInputs in = random_head(24, 16, 8, 3, spread);
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
    const AttentionInputs base = random_head(6, 4, 3, 11, 1, DType::f64);
    TruthOptions o;
    o.backward = true;
    const AttentionTruth t = attention_truth_reference(base, o);
    auto loss = [&](const AttentionInputs& in) {
        TruthOptions forward;
        forward.scale = t.scale;
        const AttentionTruth f = attention_truth_reference(in, forward);
        const std::vector<double> d_o = values(*in.d_o);
        long double l = 0;
        for (std::size_t i = 0; i < f.o.size(); ++i) l += static_cast<long double>(d_o[i]) * f.o[i];
        return static_cast<double>(l);
    };
    struct Case {
        Tensor AttentionInputs::*tensor;
        const std::vector<double>* gradient;
    };
    for (const Case c : {Case{&AttentionInputs::q, &t.dq}, Case{&AttentionInputs::k, &t.dk}, Case{&AttentionInputs::v, &t.dv}}) {
        const std::vector<double> x = values(base.*c.tensor);
        for (std::size_t e = 0; e < x.size(); ++e) {
            const double h = 0x1p-12;
            // Tensors share their bytes when copied: build new ones.
            AttentionInputs up = base, down = base;
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
    const AttentionInputs in = random_head(32, 16, 8, 5, 2);
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
    const AttentionInputs in = random_head(16, 8, 8, 9);
    TruthOptions low, high;
    low.backward = high.backward = true;
    low.precision = 24;
    const AttentionTruth a = attention_truth_reference(in, low), b = attention_truth_reference(in, high);
    CHECK(a.max_precision_used > 24);
    CHECK(a.o == b.o);
    CHECK(a.lse == b.lse);
    CHECK(a.dq == b.dq);
    CHECK(a.dk == b.dk);
    CHECK(a.dv == b.dv);
    CHECK(a.delta == b.delta);
}

TEST_CASE("Truth: repeated maxima, and NaN inputs refused", "[truth][reference]") {
    AttentionInputs in = random_head(8, 4, 4, 2);
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
