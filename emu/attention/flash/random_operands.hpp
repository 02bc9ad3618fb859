#pragma once
// Random attention operands for tests and benchmarks: Gaussian values rounded once (nearest
// even) into a format, one seed per tensor. (analysis/synthetic_attention.hpp builds the
// scenario inputs of the analyses; this is the plain random head.)
#include <cstdint>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"

namespace roundscope::emu {

/// `count` values drawn from N(mean, sd^2) by std::mt19937_64(seed), each rounded into `f`.
std::vector<std::uint32_t> gaussian_bits(std::uint64_t count, const Format& f, std::uint64_t seed, double sd = 1,
                                         double mean = 0);

/// `heads` heads of n_q queries and n_kv keys, D = Dv = d, scale 1/sqrt(d) in float32.
AttentionShape attention_shape(std::uint64_t heads, std::uint64_t n_q, std::uint64_t n_kv, std::uint64_t d,
                               bool causal);

/// q, k (standard deviation `sd`), v and dO (standard deviation 1) in `f`, seeds seed .. seed + 3;
/// k and v with the shape's key-value heads (heads / kv_group).
AttentionOperands random_operands(const AttentionShape& s, const Format& f, std::uint64_t seed, double sd = 1);

}  // namespace roundscope::emu
