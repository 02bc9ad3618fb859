#pragma once
// The Hopper backward kernels' fixed shape and parameters: the forward's 128 x 128 tiles, threads
// and register split (gpu/kernels/hopper/config.cuh), and what a launch of the dK/dV kernel or
// the dQ kernel takes.
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "gpu/kernels/hopper/config.cuh"
#include "gpu/primitives/tma.hpp"

namespace roundscope::gpu::hopper::backward {

/// Rows of a consumer warpgroup's transposed scores (S^T, dP^T) at a time in the dK/dV kernel: a
/// row block in two halves keeps S^T and dP^T at 32 registers each beside dK and dV (64 each at
/// D 128). The products' k16 steps run in the same order either way.
inline constexpr int half_rows = 64;

struct BackwardParams {
    TmaMap q_map, k_map, v_map, do_map;  // [heads][n][d] BF16: boxes 64 columns x 128 rows
    const float *lse2, *delta;           // [heads][n_q]: the forward's LSE (log2 units), rowsum(dO O)
    std::uint16_t *dq, *dk, *dv;         // [heads][n][d] in BF16
    std::uint64_t n_q, n_kv;
    bool causal;
    float scale_log2;   // exp2's constant (the recipe's scale_log2)
    float dk_dq_scale;  // dK and dQ times the softmax scale at the end
    emu::Exp2Kind exp2;
    emu::Exp2Arg exp2_arg;
};

}  // namespace roundscope::gpu::hopper::backward
