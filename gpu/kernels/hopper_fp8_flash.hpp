#pragma once
// The FP8 Hopper forward kernel (gpu/kernels/hopper_fp8_flash_kernel.cuh) from the host:
// h100-fp8's arithmetic with TMA, mbarriers and E4M3 wgmma, on an sm_90 GPU or the simulated
// GPU, bit for bit the emulator's run of the same recipe. hopper_flash.hpp's functions run it
// for a recipe whose inputs are E4M3.
#include <string>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"

namespace roundscope::gpu {

/// Why the FP8 kernel cannot run `recipe` on `shape` (empty: it can): it is written for
/// h100-fp8's arithmetic (E4M3 Q, K, V and P, BF16 O; wgmma; FlashAttention-3's FP8 tiles; the
/// online softmax with row_sum=lane-tile; FlashAttention-3's epilogue), d = d_v of 64 or 128,
/// whole problems, and an sm_90 GPU; exp2 is ex2.approx.ftz. The choices it takes from the
/// recipe: kv_order, exp2_arg, rescale_arg, scale_log2 and max_offset.
std::string hopper_fp8_flash_unsupported(const emu::AttentionRecipe& recipe, const emu::AttentionShape& shape);

/// O, its float32 values before the cast, and the LSE; Error when unsupported.
emu::ForwardResult hopper_fp8_flash_forward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& shape,
                                            const emu::AttentionOperands& in);

/// The kernel's seconds in each of `repeats` launches, as time_hopper_flash_forward times them.
std::vector<double> time_hopper_fp8_flash_forward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& shape,
                                                  const emu::AttentionOperands& in, int repeats);

}  // namespace roundscope::gpu
