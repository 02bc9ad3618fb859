#pragma once
// Synthetic attention inputs for the scenarios the research behind roundscope describes, as
// float32 tensors q, k, v, do [H, N, D] (the recipe rounds them to its input format):
//   random        q, k, v, dO standard normal (scores N(0, 1) after the 1/sqrt(D) scale)
//   sink          the first k_sink keys score about sink_strength (Delta) above the rest, the
//                 other scores N(0, 1) (arXiv:2606.06521's attention sink)
//   repeated_max  tied_keys (T, 2) identical keys score tie_gap (G) above the rest in every row,
//                 and V is mostly negative (Qiu & Yao's BF16 bias: P-bar = 1 twice per row); the
//                 T keys hold about 1 / (1 + (N - T) e^(1/2 - G) / T) of each row's P-bar mass
//                 (T = 2: more than 1 - 2^-9 from G = 12.3 at N = 512, for a row without score
//                 noise). T = 1 is a single dominant key, as in a real sink head: no tie, the
//                 row sum l = 1 + e
//   wide          scores spread over hundreds (q and k with standard deviation `spread`, 6)
// With d_model > 0 the inputs also hold the layer input x [N, M] and the query weight wq
// [H, M, D], and q = x wq (rounded to float32) in place of the drawn q, with the same
// distribution: x is standard normal but for one constant "massive" feature of 32 (the large
// constant activations of trained LLMs' residual streams: Sun et al., "Massive Activations in
// Large Language Models", arXiv:2402.17762), which wq turns into the scenario's constant q
// feature where it has one. k, v and dO do not change.
#include <cstdint>
#include <string_view>

#include "emu/attention/inputs/attention_inputs.hpp"

namespace roundscope::analysis {

enum class Scenario : std::uint8_t { random, sink, repeated_max, wide };

struct SyntheticSpec {
    Scenario scenario = Scenario::random;
    std::uint64_t heads = 1, n = 256, d = 64;
    std::uint64_t seed = 0;
    int k_sink = 4;
    double sink_strength = 8;     // Delta
    double tie_gap = 8;           // repeated_max: the tied keys' score above the rest (G)
    std::uint64_t tied_keys = 2;  // repeated_max: how many identical keys lead (T; 1: one dominant key)
    double spread = 6;            // wide: the standard deviation of q and k (scores: spread^2)
    std::uint64_t d_model = 0;    // M: with M >= 2, also x and wq (q = x wq); 0: neither
};

/// The inputs of `spec` (no causal flag or scale in them: callers choose).
emu::AttentionInputs synthetic_attention(const SyntheticSpec& spec);

/// "random", "sink", "repeated-max", "wide".
std::string_view scenario_name(Scenario s);

/// The scenario of that name; Error naming `option` otherwise.
Scenario parse_scenario(std::string_view name, std::string_view option);

}  // namespace roundscope::analysis
