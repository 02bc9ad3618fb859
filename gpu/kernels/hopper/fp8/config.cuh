#pragma once
// The FP8 Hopper forward kernel's fixed shape (h100-fp8): FlashAttention-3's FP8 tiles (its
// hopper/tile_size.h: 128 query rows over 160 keys at D = 64, 224 at D = 128), E4M3 elements of
// one byte, and the parameters a launch takes. Its threads, registers, ring depth and named
// barriers are the BF16 kernel's (../config.cuh).
//
// V is given transposed, V^T [heads][D][keys padded to 32], so that P V reads it K-major (the
// PTX ISA transposes only 16-bit operands), and within each 32 keys permuted so that the P a
// thread holds in S's accumulator layout is already its FP8 A fragment: the A fragment's k
// position 16 h + 4 t + b (h < 2, t = lane % 4, b < 4) holds key permuted_key(16 h + 4 t + b) =
// 16 h + 2 t + b % 2 + 8 (b / 2), which are the keys 8 j + 2 t + b % 2 of S's registers. A
// k32 step multiplies the same 32 products either way; the wgmma model sums a step's products as
// one set, so the order within it does not change a bit (tests/gpu_host/test_hopper_fp8_host.cpp).
// FlashAttention-3 moves P's bytes between registers instead; the host here permutes V once.
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "gpu/kernels/hopper/config.cuh"
#include "gpu/primitives/tma.hpp"

namespace roundscope::gpu::hopper::fp8 {

/// The keys of a KV tile for head dimension D.
template <int D>
inline constexpr int block_n = D == 64 ? 160 : 224;

inline constexpr int key_panel = 32;  // V^T's tiles: panels of 32 keys (one k32 step) x D rows

/// Q's and K's rows are D bytes, one swizzle span each.
template <int D>
inline constexpr Swizzle qk_swizzle = D == 64 ? Swizzle::b64 : Swizzle::b128;

/// The key at k position k (0 .. 31) of a 32-key step of V^T (above).
ROUNDSCOPE_HD constexpr int permuted_key(int k) { return k / 16 * 16 + k % 16 / 4 * 2 + k % 2 + k % 4 / 2 * 8; }

struct ForwardParams {
    TmaMap q_map, k_map, vt_map;  // Q, K [heads][n][d] (boxes d x 128, K: d x block_n); V^T (boxes 32 x d)
    std::uint16_t* o;             // [heads][n_q][d] BF16
    float *lse, *lse2;            // [heads][n_q]
    float* o_f32;                 // [heads][n_q][d]: O before its cast, or null
    std::uint64_t n_q, n_kv;
    bool causal, reverse;
    emu::steps::OnlineSoftmax softmax;  // its P format E4M3 (the host checks)
};

}  // namespace roundscope::gpu::hopper::fp8
