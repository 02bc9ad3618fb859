#pragma once
// What PyTorch's math SDPA (attention.cpp's _scaled_dot_product_attention_math) does to q and k
// before its GEMMs on any device: each is upcast to float32 (exact) and multiplied by
// RN(sqrt(scale)), the root taken in double. The GPU's (cuda_math_forward.hpp) and the CPU's
// (aten_cpu_math_forward.hpp) math paths share it. Internal to emu/attention/flash.
#include <cstdint>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/numbers/format.hpp"

namespace roundscope::emu::detail {

/// The factor q and k are each multiplied by: RN(sqrt(scale)) from the scale as the caller gave
/// it (scale_given), else from 1/sqrt(d) where that is the float32 scale, else from the float32 scale.
float math_path_root_scale(const AttentionShape& shape);

/// count values of format f (bits, one per uint32) as float32 bits, each times factor, rounded
/// to float32 (ATen's multiply of a float tensor by a scalar; a factor of 1 upcasts exactly).
std::vector<std::uint32_t> math_path_scaled(const std::uint32_t* x, std::uint64_t count, const Format& f, float factor);

}  // namespace roundscope::emu::detail
