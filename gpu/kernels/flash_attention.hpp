#pragma once
// The CUDA twin of the flash-attention emulator (emu/attention/flash/flash_attention.hpp): the same recipe, the
// same tiles and order, the scalar steps from emu/attention/softmax/attention_steps.hpp, and mma.sync for every
// product, whose models emu/mma/mma_model.hpp proves bit-exact on the hardware. The same bits as
// the emulator run with the device's architecture (gpu::model_arch).
#include <string>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"

namespace roundscope::gpu {

/// Why the kernels do not implement `recipe` (its forward pass, and with `backward` its backward
/// pass), as "KEY=VALUE: why" from their row of the capability table (emu/attention/recipe/kernel_capabilities.hpp);
/// empty: they do.
std::string flash_unsupported(const emu::AttentionRecipe& recipe, bool backward = true);

/// Why the kernels cannot run `recipe` (its forward pass, and with `backward` its backward pass)
/// on the device at hand: no mma.sync model of its inputs on this architecture (FP8 on sm_80),
/// or more shared memory per block than the device allows. Empty: they can.
std::string flash_not_runnable_here(const emu::AttentionRecipe& recipe, bool backward);

/// Throws Error when no GPU is usable or the recipe is unsupported.
emu::ForwardResult flash_forward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& shape,
                                 const emu::AttentionOperands& in);

/// The kernels' seconds in each of `repeats` forward passes on inputs uploaded once (after one
/// that is not timed), by CUDA events around each kernel (KernelTimer): what
/// tools/gpu/bench_flash_gpu reports. On the simulated GPU, the simulation's wall clock.
std::vector<double> time_flash_forward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& shape,
                                       const emu::AttentionOperands& in, int repeats);

/// The backward pass of the same recipe from the forward pass's LSE and O.
emu::BackwardResult flash_backward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& shape,
                                   const emu::AttentionOperands& in, const emu::ForwardResult& forward);

}  // namespace roundscope::gpu
