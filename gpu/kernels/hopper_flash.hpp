#pragma once
// The Hopper forward kernel (gpu/kernels/hopper_flash_kernel.cuh) from the host: h100-bf16's arithmetic
// with TMA, mbarriers and wgmma, on an sm_90 GPU or the simulated GPU, bit for bit the
// emulator's run of the same recipe.
#include <string>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"

namespace roundscope::gpu {

/// Why the Hopper kernel cannot run `recipe` on `shape` (empty: it can). A recipe with 8-bit
/// inputs goes to the FP8 kernel (hopper_fp8_flash.hpp says what it runs); every other to the
/// BF16 kernel, which is written for
/// h100-bf16's arithmetic (BF16 inputs, P and O; wgmma; 128 x 128 tiles; the online softmax with
/// row_sum=quad-ffma), d = d_v of 64 or 128, whole problems, and an sm_90 GPU. The choices it
/// takes from the recipe: kv_order, exp2 (software, ex2.approx or ex2.approx.ftz), exp2_arg,
/// rescale_arg, scale_log2 and p_scale.
std::string hopper_flash_unsupported(const emu::AttentionRecipe& recipe, const emu::AttentionShape& shape);

/// O, its float32 values before the cast, and the LSE; Error when unsupported.
emu::ForwardResult hopper_flash_forward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& shape,
                                        const emu::AttentionOperands& in);

/// The kernel's seconds in each of `repeats` launches on inputs uploaded once, after one launch
/// that is not timed (without the float32 copy of O), by CUDA events (KernelTimer): what the
/// benchmark reports. On the simulated GPU, the simulation's wall clock.
std::vector<double> time_hopper_flash_forward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& shape,
                                              const emu::AttentionOperands& in, int repeats);

}  // namespace roundscope::gpu
