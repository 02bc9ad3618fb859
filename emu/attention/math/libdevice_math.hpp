#pragma once
// CUDA's expf and logf as nvcc compiles them for sm_90 without fast math (libdevice), operation
// by operation as the SASS of PyTorch's split-KV combine kernel shows them
// (flash_fwd_splitkv_combine_kernel in the torch wheel's libtorch_cuda.so, docs/gpu.md). Host
// only: on a GPU they are the device's own expf and logf.
#include <cmath>
#include <cstdint>

#include "emu/attention/math/softmax_choices.hpp"
#include "emu/numbers/f32_arith.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu {

/// expf(x): n = floor(252 sat(x log2e / 252 + 1/2)) (FFMA.SAT, then FFMA.RM into 1.5 2^23 + 1,
/// whose low bits are n); j = n - 126; 2^j from those bits shifted into the exponent;
/// f = x log2e - j in two fused steps (log2e split in two floats); 2^j MUFU.EX2(f).
inline float libdevice_expf(float x) {
    namespace a = f32_arith;
    float t = a::fma(x, float_from_bits(0x3BBB989Du), 0.5f);  // log2e / 252
    t = t != t ? 0.0f : std::fmin(std::fmax(t, 0.0f), 1.0f);  // .sat: [0, 1], NaN to +0
    // FFMA.RM(t, 252, 12582913): the sum lies in [2^23, 2^24), where floats are the integers,
    // so rounding down takes the floor; 252 t is exact in double.
    const auto n = static_cast<std::uint32_t>(std::floor(static_cast<double>(t) * 252.0));
    const float r = float_from_bits(0x4B400001u + n);  // 12582913 + n
    const float j = a::add(r, -12583039.0f);           // n - 126
    const float two_j = float_from_bits(bits_of(r) << 23);
    float f = a::fma(x, 1.4426950216293334961f, -j);
    f = a::fma(x, 1.925963033500011079e-08f, f);
    return a::mul(two_j, detail::mufu_ex2_ftz(f));
}

/// logf(x): subnormals scaled by 2^23; x = 2^k m with m in [2/3, 4/3) from the bits (x minus
/// the bits of 2/3, the exponent field kept); log(m) = u + u^2 p(u) with u = m - 1 and p of
/// degree 8 in fused steps; plus k ln 2. +inf, NaN and negatives through fma(x, inf, inf); 0
/// gives -inf.
inline float libdevice_logf(float x) {
    namespace a = f32_arith;
    float e0 = 0.0f;
    if (!(x >= 0x1p-126f)) x = a::mul(x, 8388608.0f), e0 = -23.0f;
    const std::uint32_t k_bits = (bits_of(x) - 0x3F2AAAABu) & 0xFF800000u;
    const float u = a::add(float_from_bits(bits_of(x) - k_bits), -1.0f);
    const float k = a::fma(static_cast<float>(static_cast<std::int32_t>(k_bits)), 0x1p-23f, e0);
    float p = a::fma(u, -float_from_bits(0x3E055027u), 0.14084610342979431152f);
    for (const float c : {-0.12148627638816833496f, 0.13980610668659210205f, -0.16684235632419586182f,
                          0.20012299716472625732f, -0.24999669194221496582f, 0.33333182334899902344f, -0.5f})
        p = a::fma(u, p, c);
    p = a::mul(u, p);
    float r = a::fma(u, p, u);
    r = a::fma(k, 0.69314718246459960938f, r);
    const float inf = float_from_bits(0x7F800000u);
    if (bits_of(x) >= 0x7F800000u) r = a::fma(x, inf, inf);
    return x != 0.0f ? r : -inf;
}

}  // namespace roundscope::emu
