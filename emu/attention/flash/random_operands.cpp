#include "emu/attention/flash/random_operands.hpp"

#include <cmath>
#include <random>

#include "emu/numbers/round.hpp"

namespace roundscope::emu {

std::vector<std::uint32_t> gaussian_bits(std::uint64_t count, const Format& f, std::uint64_t seed, double sd,
                                         double mean) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g(mean, sd);
    std::vector<std::uint32_t> x(count);
    for (auto& v : x) v = static_cast<std::uint32_t>(cast_from_f64(g(rng), f, CastOptions{}));
    return x;
}

AttentionShape attention_shape(std::uint64_t heads, std::uint64_t n_q, std::uint64_t n_kv, std::uint64_t d,
                               bool causal) {
    AttentionShape s;
    s.heads = heads, s.n_q = n_q, s.n_kv = n_kv, s.d = d, s.d_v = d, s.causal = causal;
    s.scale = static_cast<float>(1 / std::sqrt(static_cast<double>(d)));
    return s;
}

AttentionOperands random_operands(const AttentionShape& s, const Format& f, std::uint64_t seed, double sd) {
    AttentionOperands in;
    in.q = gaussian_bits(s.heads * s.n_q * s.d, f, seed, sd);
    const std::uint64_t kv_heads = s.heads / s.kv_group;
    in.k = gaussian_bits(kv_heads * s.n_kv * s.d, f, seed + 1, sd);
    in.v = gaussian_bits(kv_heads * s.n_kv * s.d_v, f, seed + 2);
    in.d_o = gaussian_bits(s.heads * s.n_q * s.d_v, f, seed + 3);
    return in;
}

}  // namespace roundscope::emu
