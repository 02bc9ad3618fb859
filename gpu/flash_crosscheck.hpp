#pragma once
// Kernel against emulator on the same input: every output bit compared (`roundscope
// crosscheck`, tests/gpu/test_gpu_flash.cpp). The emulator runs the recipe with the device's
// tensor-core model (gpu::model_arch).
#include <map>
#include <string>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/numbers/bit_compare.hpp"

namespace roundscope::gpu {

struct FlashCrosscheck {
    std::string device, arch;
    std::string kernel;  // "twins" (gpu/kernels/flash_attention.hpp) or "hopper" (gpu/kernels/hopper_flash.hpp)
    std::map<std::string, emu::BitComparison> outputs;              // "o", "lse" (and "dq", "dk", "dv", "delta")
    std::map<std::string, std::pair<double, double>> first_values;  // emulator and GPU value at the first mismatch
    emu::BitComparison total;                                       // all outputs together
    emu::ForwardResult gpu_forward;  // the kernel's own forward outputs (o, lse; o_f32 from the Hopper kernel)
};

/// Throws Error without a usable GPU or for a recipe the kernels do not run. A recipe the Hopper
/// kernel runs (gpu/kernels/hopper_flash.hpp: h100-bf16) is checked on it (O, O in float32 and the LSE;
/// with `backward`, the Hopper backward's dQ, dK, dV and delta); others on the twins. `threads`: the emulator's.
FlashCrosscheck flash_crosscheck(emu::AttentionRecipe recipe, const emu::AttentionShape& shape,
                                 const emu::AttentionOperands& in, bool backward, int threads = 0);

}  // namespace roundscope::gpu
