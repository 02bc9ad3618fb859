// The query-weight error (analysis/query_weight_error.hpp) against a straightforward long-double
// computation from the definitions: P by a softmax of each row, dQ = scale P * (dP - delta) K,
// R_T = x[T]^T (PK)[T], every pair of rows for the mean cosine, E = scale sum_T c[T] R_T, and
// dW^Q = x^T dQ. Batches, heads, both weight layouts and the causal mask are covered.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "analysis/query_weight_error.hpp"
#include "analysis/rounding_bias.hpp"
#include "analysis/synthetic_attention.hpp"

using namespace roundscope;
using namespace roundscope::analysis;

namespace {

using Real = long double;

struct Layer {
    std::uint64_t batch = 2, heads = 2, n = 12, d = 4, m = 6;
    std::vector<float> x, w, k, v, d_o;  // x [B][N][M], w [H][M][D], k, v, dO [B][H][N][D]
    std::vector<double> c;               // [B][H][N]
};

Layer random_layer(std::uint64_t seed, bool common_x = false, bool common_k = false) {
    Layer l;
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    auto draw = [&](std::size_t count) {
        std::vector<float> out(count);
        for (auto& e : out) e = static_cast<float>(normal(rng));
        return out;
    };
    l.x = draw(l.batch * l.n * l.m), l.w = draw(l.heads * l.m * l.d);
    l.k = draw(l.batch * l.heads * l.n * l.d), l.v = draw(l.batch * l.heads * l.n * l.d),
    l.d_o = draw(l.batch * l.heads * l.n * l.d);
    for (std::size_t i = 0; i < l.x.size(); ++i)
        if (common_x) l.x[i] = l.x[i % l.m];
    for (std::size_t i = 0; i < l.k.size(); ++i)
        if (common_k) l.k[i] = l.k[i % l.d];
    for (std::uint64_t i = 0; i < l.batch * l.heads * l.n; ++i) l.c.push_back(normal(rng) + 0.5);
    return l;
}

// q = x W^Q rounded to float; the weight as [H, M, D] or fused [M, H * D].
emu::AttentionInputs inputs_of(const Layer& l, bool fused_weight) {
    std::vector<float> q(l.batch * l.heads * l.n * l.d), wf(l.w.size());
    for (std::uint64_t b = 0; b < l.batch; ++b)
        for (std::uint64_t h = 0; h < l.heads; ++h)
            for (std::uint64_t t = 0; t < l.n; ++t)
                for (std::uint64_t j = 0; j < l.d; ++j) {
                    double sum = 0;
                    for (std::uint64_t a = 0; a < l.m; ++a)
                        sum += double(l.x[(b * l.n + t) * l.m + a]) * double(l.w[(h * l.m + a) * l.d + j]);
                    q[((b * l.heads + h) * l.n + t) * l.d + j] = static_cast<float>(sum);
                }
    for (std::uint64_t h = 0; h < l.heads; ++h)
        for (std::uint64_t a = 0; a < l.m; ++a)
            for (std::uint64_t j = 0; j < l.d; ++j) wf[a * l.heads * l.d + h * l.d + j] = l.w[(h * l.m + a) * l.d + j];
    const Shape shape{l.batch, l.heads, l.n, l.d};
    emu::AttentionInputs in{.q = Tensor::of_bits("q", DType::f32, shape, q),
                            .k = Tensor::of_bits("k", DType::f32, shape, l.k),
                            .v = Tensor::of_bits("v", DType::f32, shape, l.v)};
    in.d_o = Tensor::of_bits("do", DType::f32, shape, l.d_o);
    in.x = Tensor::of_bits("x", DType::f32, {l.batch, l.n, l.m}, l.x);
    in.w_q = fused_weight ? Tensor::of_bits("wq", DType::f32, {l.m, l.heads * l.d}, wf)
                          : Tensor::of_bits("wq", DType::f32, {l.heads, l.m, l.d}, l.w);
    in.w_q_per_head = !fused_weight;
    in.batch = l.batch, in.heads = l.heads, in.n_q = in.n_kv = l.n, in.d = in.d_v = l.d, in.d_model = l.m;
    return in;
}

struct Expected {
    Real mean_cosine, structure_cosine, error_norm, gradient_norm, projection_residual;
};

Real frobenius(const std::vector<Real>& a) {
    Real s = 0;
    for (Real e : a) s += e * e;
    return std::sqrt(s);
}

// Head h by the definitions, with q as the inputs hold it (rounded x W^Q).
Expected brute_force(const Layer& l, const emu::AttentionInputs& in, std::uint64_t h, bool causal) {
    const std::vector<double> q = [&] {
        std::vector<double> out(in.q.size());
        for (std::size_t i = 0; i < out.size(); ++i)
            out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(in.q.bits_at(i)));
        return out;
    }();
    const Real scale = 1 / std::sqrt(Real(l.d));
    const std::uint64_t n = l.n, d = l.d, m = l.m;
    std::vector<std::vector<Real>> xs, pks;
    std::vector<Real> error(m * d, 0), gradient(m * d, 0), unit(m * d, 0);
    Real residual = 0, q_norm = 0;
    for (std::uint64_t b = 0; b < l.batch; ++b)
        for (std::uint64_t t = 0; t < n; ++t) {
            const std::uint64_t row = (b * l.heads + h) * n + t, keys = causal ? t + 1 : n;
            const float* k = l.k.data() + (b * l.heads + h) * n * d;
            const float* v = l.v.data() + (b * l.heads + h) * n * d;
            const float* dout = l.d_o.data() + row * d;
            std::vector<Real> p(keys), dp(keys), pk(d, 0), dq(d, 0);
            Real mx = -INFINITY, sum = 0, delta = 0;
            for (std::uint64_t j = 0; j < keys; ++j) {
                p[j] = 0;
                for (std::uint64_t i = 0; i < d; ++i) p[j] += Real(q[row * d + i]) * k[j * d + i];
                p[j] *= scale, mx = std::max(mx, p[j]);
            }
            for (auto& e : p) e = std::exp(e - mx), sum += e;
            for (std::uint64_t j = 0; j < keys; ++j) {
                p[j] /= sum, dp[j] = 0;
                for (std::uint64_t i = 0; i < d; ++i) dp[j] += Real(dout[i]) * v[j * d + i];
                delta += p[j] * dp[j];
                for (std::uint64_t i = 0; i < d; ++i) pk[i] += p[j] * k[j * d + i];
            }
            for (std::uint64_t j = 0; j < keys; ++j)
                for (std::uint64_t i = 0; i < d; ++i) dq[i] += scale * p[j] * (dp[j] - delta) * k[j * d + i];
            std::vector<Real> x(m);
            for (std::uint64_t a = 0; a < m; ++a) x[a] = l.x[(b * n + t) * m + a];
            const Real nx = frobenius(x), np = frobenius(pk);
            for (std::uint64_t a = 0; a < m; ++a)
                for (std::uint64_t i = 0; i < d; ++i) {
                    error[a * d + i] += scale * l.c[row] * x[a] * pk[i];
                    gradient[a * d + i] += x[a] * dq[i];
                    unit[a * d + i] += x[a] * pk[i] / (nx * np);
                }
            xs.push_back(x), pks.push_back(pk);
            for (std::uint64_t i = 0; i < d; ++i) {
                Real projected = 0;
                for (std::uint64_t a = 0; a < m; ++a) projected += x[a] * Real(l.w[(h * m + a) * d + i]);
                residual += (q[row * d + i] - projected) * (q[row * d + i] - projected),
                    q_norm += Real(q[row * d + i]) * q[row * d + i];
            }
        }
    // every pair (T, T'), T != T': cos(R_T, R_T') = cos(x_T, x_T') cos(pk_T, pk_T')
    auto cosine = [](const std::vector<Real>& a, const std::vector<Real>& b) {
        Real dot = 0;
        for (std::size_t i = 0; i < a.size(); ++i) dot += a[i] * b[i];
        return dot / (frobenius(a) * frobenius(b));
    };
    Real pairs = 0, cosines = 0;
    for (std::size_t s = 0; s < xs.size(); ++s)
        for (std::size_t t = 0; t < xs.size(); ++t)
            if (s != t) cosines += cosine(xs[s], xs[t]) * cosine(pks[s], pks[t]), ++pairs;
    return {cosines / pairs, cosine(error, unit), frobenius(error), frobenius(gradient), std::sqrt(residual / q_norm)};
}

}  // namespace

TEST_CASE("The query-weight error equals its definition, over batches and heads, with either weight layout",
          "[bias][query_weight]") {
    for (const bool causal : {false, true}) {
        for (const bool fused : {false, true}) {
            const Layer l = random_layer(causal ? 7 : 3);
            const emu::AttentionInputs in = inputs_of(l, fused);
            TruthOptions t;
            t.causal = causal, t.backward = true;
            const AttentionTruth truth = attention_truth(in, t);
            const QueryWeightError r = query_weight_error(in, l.c, truth, 2);
            REQUIRE(r.per_head.size() == l.heads);
            for (std::uint64_t h = 0; h < l.heads; ++h) {
                const Expected e = brute_force(l, in, h, causal);
                const QueryWeightHead& got = r.per_head[h];
                INFO("causal " << causal << ", fused weight " << fused << ", head " << h);
                CHECK(got.rows == l.batch * l.n);
                CHECK(got.rank1_mean_cosine == Approx(double(e.mean_cosine)).epsilon(1e-12));
                CHECK(got.error_structure_cosine == Approx(double(e.structure_cosine)).epsilon(1e-12));
                CHECK(got.dwq_error_norm == Approx(double(e.error_norm)).epsilon(1e-12));
                CHECK(got.dwq_norm == Approx(double(e.gradient_norm)).epsilon(1e-12));
                REQUIRE(got.q_projection_residual);
                CHECK(*got.q_projection_residual == Approx(double(e.projection_residual)).epsilon(1e-6));
                CHECK(*got.q_projection_residual < 1e-6);  // q is x W^Q rounded to float32
                double c_sum = 0;
                for (std::uint64_t b = 0; b < l.batch; ++b)
                    for (std::uint64_t i = 0; i < l.n; ++i) c_sum += l.c[(b * l.heads + h) * l.n + i];
                CHECK(got.coefficient_sum == Approx(c_sum).epsilon(1e-14));
            }
        }
    }
}

TEST_CASE("Identical rank-1 matrices have cosine 1 and the error lies along them with the sign of the coefficient sum",
          "[bias][query_weight]") {
    // every x[T] the same and one key per head, the same in every batch: (PK)[T] = k for every T,
    // so R_T = x^T k for all T
    const Layer l = random_layer(11, true);
    emu::AttentionInputs in = inputs_of(l, false);
    const Shape one_key{l.batch, l.heads, 1, l.d};
    std::vector<float> k(l.batch * l.heads * l.d), v(k.size());
    for (std::uint64_t bh = 0; bh < l.batch * l.heads; ++bh)
        for (std::uint64_t i = 0; i < l.d; ++i)
            k[bh * l.d + i] = l.k[bh % l.heads * l.n * l.d + i], v[bh * l.d + i] = l.v[bh * l.n * l.d + i];
    in.k = Tensor::of_bits("k", DType::f32, one_key, k), in.v = Tensor::of_bits("v", DType::f32, one_key, v),
    in.n_kv = 1;
    TruthOptions t;
    t.backward = true;
    const QueryWeightError r = query_weight_error(in, l.c, attention_truth(in, t), 1);
    for (const QueryWeightHead& h : r.per_head) {
        CHECK(h.rank1_mean_cosine == Approx(1).margin(1e-12));
        CHECK(h.error_structure_cosine == Approx(h.coefficient_sum > 0 ? 1 : -1).margin(1e-12));
        CHECK(h.dwq_norm == 0);  // one key: P = 1, dS = 0
    }
}

TEST_CASE("The query-weight error has the same bits on 1 and 2 threads", "[bias][query_weight]") {
    SyntheticSpec spec;
    spec.scenario = Scenario::repeated_max, spec.n = 96, spec.d = 16, spec.heads = 2, spec.d_model = 40;
    const emu::AttentionInputs in = synthetic_attention(spec);
    BiasOptions o;
    o.recipe = emu::find_recipe("fa2-bf16");
    o.threads = 1;
    const BiasResult one = rounding_bias(in, o);
    o.threads = 2;
    const BiasResult two = rounding_bias(in, o);
    REQUIRE((one.query_weight && two.query_weight));
    CHECK(one.query_weight->error == two.query_weight->error);
    CHECK(one.query_weight->structure == two.query_weight->structure);
    CHECK(one.query_weight->dwq_norm == two.query_weight->dwq_norm);
    // the synthetic q is x W^Q, and the heads' coefficients add up to the whole sum
    double sum = 0;
    for (const auto& h : one.query_weight->per_head) {
        CHECK(*h.q_projection_residual < 1e-6);
        sum += h.coefficient_sum;
    }
    CHECK(sum == Approx(one.coefficient_sum).epsilon(1e-12));
    // the massive constant feature of x makes the R_T alike (cos(x_T, x_T') about 32^2 / (32^2 + 39))
    CHECK(one.query_weight->rank1_mean_cosine > 0.5);
}
