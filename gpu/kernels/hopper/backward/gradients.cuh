#pragma once
// What the backward kernels compute between their GEMMs, and the GEMMs themselves: an element's
// P and dS by the emulator's own rules (steps::backward_p, steps::d_score), a pair of adjacent
// accumulator elements cast to BF16 by one cvt.rn.satfinite.bf16x2.f32 (the BF16 saturating cast,
// proved equal to the emulator's on all 2^32 inputs: test_gpu_cast), packed as the A fragment of
// the next wgmma (the forward's P: an accumulator's columns are that product's k); and the
// products as chains of k16 wgmmas, every one from a zeroed accumulator (the emulator's products
// start from C = +0).
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "gpu/kernels/hopper/backward/config.cuh"
#include "gpu/kernels/hopper/gemms.cuh"
#include "gpu/primitives/convert.hpp"
#include "gpu/primitives/wgmma.hpp"

namespace roundscope::gpu::hopper::backward {

/// One element's P and dS = P (dP - delta), before their casts.
struct Gradient {
    float p, ds;
};

ROUNDSCOPE_DEVICE inline Gradient gradient(const BackwardParams& bp, float s, float dp, bool visible, float lse2,
                                           float delta) {
    const float p = emu::steps::backward_p(bits_of(s), visible, lse2, bp.scale_log2, bp.exp2, bp.exp2_arg);
    return {p, emu::steps::d_score(p, dp, delta)};
}

/// A fragment pair: element x (even) and x + 1 of an accumulator, one row's adjacent columns.
struct CastPairs {
    std::uint32_t p, ds;
};

ROUNDSCOPE_DEVICE inline CastPairs cast_pairs(const Gradient& lo, const Gradient& hi) {
    return {bf16x2_rn_satfinite(lo.p, hi.p), bf16x2_rn_satfinite(lo.ds, hi.ds)};
}

template <int N>
ROUNDSCOPE_DEVICE inline void zero(float (&x)[N]) {
    ROUNDSCOPE_UNROLL
    for (int i = 0; i < N; ++i) x[i] = 0;
}

/// acc (N columns) += A B over D / 16 k16 steps, A and B K-major 128-byte-swizzled tiles of D
/// columns (a_rows, b_rows: the shared addresses of their first rows).
template <int N, int D>
ROUNDSCOPE_DEVICE void issue_k_major(float (&acc)[N / 2], std::uint32_t a_rows, std::uint32_t b_rows) {
    ROUNDSCOPE_UNROLL
    for (int kk = 0; kk < D / 16; ++kk) wgmma_bf16_ss<N>(acc, k_major_step(a_rows, kk), k_major_step(b_rows, kk), true);
}

/// acc (D columns) += A B over `Steps` k16 steps from step `first` of B: A from the packed
/// fragments a (4 registers a step), B MN-major (a streamed or held tile read along its rows).
template <int D, int Steps>
ROUNDSCOPE_DEVICE void issue_mn_major(float (&acc)[D / 2], const std::uint32_t (&a)[4 * Steps], std::uint32_t b_tile,
                                      int first) {
    ROUNDSCOPE_UNROLL
    for (int kk = 0; kk < Steps; ++kk) {
        const std::uint32_t frag[4] = {a[4 * kk], a[4 * kk + 1], a[4 * kk + 2], a[4 * kk + 3]};
        wgmma_bf16_rs<D, Major::mn>(acc, frag, mn_major_step(b_tile, first + kk), true);
    }
}

/// An accumulator (float32 bits) times `scale`, in BF16 (steps::gradient_bits's rule, by the
/// proved cvt): scale 1 multiplies by nothing.
ROUNDSCOPE_DEVICE inline std::uint32_t gradient_pair(float lo, float hi, float scale) {
    namespace a = emu::f32_arith;
    return bf16x2_rn_satfinite(a::mul(lo, scale), a::mul(hi, scale));
}

}  // namespace roundscope::gpu::hopper::backward
