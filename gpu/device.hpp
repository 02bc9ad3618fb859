#pragma once
// The host side of gpu/: is a GPU usable, and the batch cast run by the CUDA kernel. The kernel
// calls emu::round_to_format itself, so its bits are the emulator's by construction; the GPU
// tests check that on real hardware.
#include <cstdint>
#include <span>
#include <string>

#include "emu/numbers/cast_options.hpp"
#include "emu/numbers/format.hpp"

namespace roundscope::gpu {

/// Name of the first CUDA device, or empty when none is usable (no driver, no device).
std::string device_name();

/// The CUDA compiler that built gpu/ ("nvcc 13.0.88"), and the runtime and driver versions
/// in use ("13.0"), recorded in every file `roundscope probe` writes: the bits of a capture
/// describe the code that compiler emitted (docs/mma-fp8-sm90.md).
std::string cuda_compiler();
std::string cuda_runtime_version();
std::string cuda_driver_version();

/// The GPU twin of emu::cast_batch for float32 input (element i uses random stream
/// first_index + i). Throws roundscope::Error when no GPU is usable.
template <class Bits>
void cast_batch(std::span<const float> in, const emu::Format& to, const emu::CastOptions& o, std::span<Bits> out,
                std::uint64_t first_index = 0);

/// cvt.rn.satfinite.bf16x2.f32 (gpu/primitives/convert.hpp, the Hopper kernel's cast of P and O)
/// on the GPU against emu::bf16_saturating_rne, every float32 input in each half of the pair:
/// how many pairs differ, and the first input of one (0 where none does).
struct ConvertCheck {
    std::uint64_t mismatches = 0;
    std::uint32_t first = 0;
};
ConvertCheck bf16x2_satfinite_check();
/// Two cvt.rn.satfinite.e4m3x2.f32 (gpu/primitives/convert.hpp, the FP8 Hopper kernel's cast of P)
/// against emu::steps::saturating_cast into E4M3, every float32 input in each byte.
ConvertCheck e4m3x4_satfinite_check();

}  // namespace roundscope::gpu
