#include "analysis/synthetic_attention.hpp"

#include <fmt/format.h>

#include <cmath>
#include <random>

#include "emu/numbers/round.hpp"
#include "lib/error.hpp"
#include "lib/named_values.hpp"

namespace roundscope::analysis {
namespace {

Tensor f32_tensor(const char* name, Shape shape, const std::vector<double>& x) {
    Tensor t = Tensor::zeros(name, DType::f32, std::move(shape));
    for (std::size_t i = 0; i < x.size(); ++i) t.set_bits_at(i, emu::cast_from_f64(x[i], emu::f32, emu::CastOptions{}));
    return t;
}

// x [N, M] and wq [H, M, D] with q = x wq of standard deviation `sd`; feature 0 of x is the
// constant `massive`, which wq maps to q's feature 0 as `q0` (0: feature 0 is drawn like the
// rest). Its own generator, so k, v and dO are the same with or without it.
void project_queries(const SyntheticSpec& s, double sd, double q0, emu::AttentionInputs& in) {
    constexpr double massive = 32;
    const std::uint64_t m = s.d_model;
    std::mt19937_64 rng(s.seed ^ 0x9e3779b97f4a7c15u);
    std::normal_distribution<double> normal;
    std::vector<double> x(s.n * m), w(s.heads * m * s.d, 0.0), q(s.heads * s.n * s.d, 0.0);
    for (std::uint64_t t = 0; t < s.n; ++t)
        for (std::uint64_t a = 0; a < m; ++a) x[t * m + a] = a == 0 ? massive : normal(rng);
    const double spread = sd / std::sqrt(static_cast<double>(m - 1));
    for (std::uint64_t h = 0; h < s.heads; ++h) {
        double* wh = w.data() + h * m * s.d;
        for (std::uint64_t a = 1; a < m; ++a)
            for (std::uint64_t c = q0 != 0 ? 1 : 0; c < s.d; ++c) wh[a * s.d + c] = spread * normal(rng);
        if (q0 != 0) wh[0] = q0 / massive;
        for (std::uint64_t t = 0; t < s.n; ++t)
            for (std::uint64_t a = 0; a < m; ++a)
                for (std::uint64_t c = 0; c < s.d; ++c) q[(h * s.n + t) * s.d + c] += x[t * m + a] * wh[a * s.d + c];
    }
    in.q = f32_tensor("q", {s.heads, s.n, s.d}, q);
    in.x = f32_tensor("x", {s.n, m}, x);
    in.w_q = f32_tensor("wq", {s.heads, m, s.d}, w);
    in.w_q_per_head = true, in.d_model = m;
}

}  // namespace

emu::AttentionInputs synthetic_attention(const SyntheticSpec& s) {
    if (s.n == 0 || s.d < 2 || s.heads == 0) throw Error("synthetic inputs need n >= 1, d >= 2 and heads >= 1");
    if (s.d_model == 1) throw Error("the synthetic layer input needs d_model >= 2 features (0: none)");
    std::mt19937_64 rng(s.seed);
    std::normal_distribution<double> normal;
    const std::uint64_t count = s.heads * s.n * s.d;
    const double d = static_cast<double>(s.d), scale = 1 / std::sqrt(d);
    // Scores q.k / sqrt(D) of N(0, sd^4) when q and k have standard deviation sd.
    const double sd = s.scenario == Scenario::wide     ? s.spread
                      : s.scenario == Scenario::random ? 1.0
                                                       : std::pow(d / (d - 1), 0.25);
    auto draw = [&](double deviation, double mean = 0) {
        std::vector<double> x(count);
        for (auto& v : x) v = mean + deviation * normal(rng);
        return x;
    };
    // repeated_max: V and dO mostly negative on every feature (their product makes a biased O
    // error count in delta with one sign, Qiu & Yao, arXiv:2510.04212)
    const double negative = s.scenario == Scenario::repeated_max ? -0.5 : 0.0;
    std::vector<double> q = draw(sd), k = draw(sd), v = draw(1.0, negative), d_o = draw(1.0, negative);
    for (std::uint64_t h = 0; h < s.heads; ++h) {
        double* qh = q.data() + h * s.n * s.d;
        double* kh = k.data() + h * s.n * s.d;
        if (s.scenario == Scenario::sink) {
            // feature 0 carries the sink: 4 in every query, Delta / (4 scale) in the sink keys
            for (std::uint64_t i = 0; i < s.n; ++i) qh[i * s.d] = 4;
            for (std::uint64_t j = 0; j < s.n; ++j)
                kh[j * s.d] = static_cast<std::int64_t>(j) < s.k_sink ? s.sink_strength / (4 * scale) : 0.0;
        } else if (s.scenario == Scenario::repeated_max && s.n >= 2) {
            // keys 0 .. T - 1 equal, and ahead of the rest by about G
            const std::uint64_t tied = std::min(s.tied_keys, s.n);
            for (std::uint64_t i = 0; i < s.n; ++i) qh[i * s.d] = 4;
            for (std::uint64_t j = 1; j < tied; ++j)
                for (std::uint64_t c = 0; c < s.d; ++c) kh[j * s.d + c] = kh[c];
            // their scores: 4 G sqrt(D) / 4 / sqrt(D) = G, plus noise
            for (std::uint64_t j = 0; j < tied; ++j) kh[j * s.d] = s.tie_gap * std::sqrt(d) / 4;
            for (std::uint64_t j = tied; j < s.n; ++j) kh[j * s.d] = 0;
        }
    }
    emu::AttentionInputs in;
    in.q = f32_tensor("q", {s.heads, s.n, s.d}, q);
    in.k = f32_tensor("k", {s.heads, s.n, s.d}, k);
    in.v = f32_tensor("v", {s.heads, s.n, s.d}, v);
    in.d_o = f32_tensor("do", {s.heads, s.n, s.d}, d_o);
    in.heads = s.heads, in.n_q = in.n_kv = s.n, in.d = in.d_v = s.d;
    const bool constant_q0 = s.scenario == Scenario::sink || (s.scenario == Scenario::repeated_max && s.n >= 2);
    if (s.d_model > 0) project_queries(s, sd, constant_q0 ? 4.0 : 0.0, in);
    return in;
}

namespace {
constexpr NamedValues<Scenario, 4> scenario_names{{{{Scenario::random, "random"},
                                                    {Scenario::sink, "sink"},
                                                    {Scenario::repeated_max, "repeated-max"},
                                                    {Scenario::wide, "wide"}}}};
}  // namespace

std::string_view scenario_name(Scenario s) { return scenario_names.name(s); }

Scenario parse_scenario(std::string_view name, std::string_view option) {
    return scenario_names.parse(std::string(option), name);
}

}  // namespace roundscope::analysis
