#pragma once
// One NVFP4 block: 16 FP4 E2M1 elements sharing a UE4M3 scale, under one float32 per-tensor
// scale. The two-level computation is the one NVIDIA's recipe uses (TransformerEngine; torchao
// nvfp4_tensor.py, `nvfp4_quantize`), all in float32:
//   per_tensor = amax(tensor) / (448 * 6)                   so block scales can reach 448
//   s          = e4m3(clamp(amax(block) / 6 / per_tensor, 2^-6, 448))   (UE4M3, RNE)
//   P_i        = e2m1(clamp(V_i * ((1 / per_tensor) / s), -6, 6))       (any rounding mode)
//   dequant    = P_i * s * per_tensor
// Without the per-tensor level (single-level NVFP4), per_tensor is 1. Each float32 operation
// is computed in double and rounded once to float, which equals the float32 operation:
// double rounding is innocuous for + - * / when 53 >= 2 * 24 + 2 (S. Figueroa, "When is
// double rounding innocuous?", ACM SIGNUM Newsletter 30(3), 1995).
#include <cstdint>

#include "emu/numbers/round.hpp"

namespace roundscope::emu {

inline constexpr int nvfp4_block_size = 16;

/// The float32 result of a float32 operation computed exactly in double.
ROUNDSCOPE_HD constexpr float to_f32(double x) { return static_cast<float>(x); }

ROUNDSCOPE_HD constexpr float nvfp4_per_tensor_scale(float tensor_amax) {
    return tensor_amax == 0.0f ? 1.0f : to_f32(static_cast<double>(tensor_amax) / (448.0 * 6.0));
}

/// Quantizes n <= 16 float32 values into out[0..n); returns the UE4M3 scale bits.
ROUNDSCOPE_HD inline std::uint64_t nvfp4_quantize_block(const float* v, int n, float per_tensor,
                                                        const CastOptions& options, const std::uint64_t* index,
                                                        std::uint64_t* out) {
    float amax = 0.0f;
    for (int i = 0; i < n; ++i) amax = (v[i] < 0 ? -v[i] : v[i]) > amax ? (v[i] < 0 ? -v[i] : v[i]) : amax;
    const float block_scale = to_f32(static_cast<double>(amax) / 6.0);
    float scaled = to_f32(static_cast<double>(block_scale) / static_cast<double>(per_tensor));
    constexpr float tiny = 0.015625f;  // 2^-6, E4M3's smallest normal
    scaled = scaled < tiny ? tiny : scaled > 448.0f ? 448.0f : scaled;
    constexpr Format scale_format = ue4m3;
    constexpr Format element_format = e2m1;
    CastOptions scale_options;
    scale_options.saturate = true;
    const std::uint64_t s_bits = cast_from_f32(scaled, scale_format, scale_options);
    const float s = static_cast<float>(decode(scale_format, s_bits));
    const float reciprocal =
        to_f32(static_cast<double>(to_f32(1.0 / static_cast<double>(per_tensor))) / static_cast<double>(s));
    CastOptions o = options;
    o.saturate = true;
    for (int i = 0; i < n; ++i) {
        float x = to_f32(static_cast<double>(v[i]) * static_cast<double>(reciprocal));
        x = x < -6.0f ? -6.0f : x > 6.0f ? 6.0f : x;
        out[i] = cast_from_f32(x, element_format, o, index[i]);
    }
    return s_bits;
}

ROUNDSCOPE_HD inline float nvfp4_dequantize(std::uint64_t p, std::uint64_t scale_bits, float per_tensor) {
    constexpr Format scale_format = ue4m3;
    constexpr Format element_format = e2m1;
    const double element_times_scale = decode(element_format, p) * decode(scale_format, scale_bits);  // exact
    return to_f32(element_times_scale * static_cast<double>(per_tensor));
}

}  // namespace roundscope::emu
