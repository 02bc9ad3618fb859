#pragma once
// The Hopper backward kernels (gpu/kernels/hopper/backward/) from the host: h100-bf16's backward
// (grad_schedule=in-order, delta from the stored O) with TMA, mbarriers and wgmma on an sm_90 GPU
// or the simulated GPU, bit for bit the emulator's, and deterministic: three passes (delta; dK and
// dV a key block each; dQ a row block each), no atomics.
#include <string>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"

namespace roundscope::gpu {

/// Why the Hopper backward cannot run `recipe` on `shape` (empty: it can): the forward kernel's
/// reasons (hopper_flash_unsupported), 8-bit inputs (the FP8 kernel has no backward), and the
/// backward keys of the kernel's row of the capability table (BF16 dS and gradients, delta from
/// the stored O in float32 in order, the in-order schedule).
std::string hopper_flash_backward_unsupported(const emu::AttentionRecipe& recipe, const emu::AttentionShape& shape);

/// dQ, dK, dV and delta from the forward's O and LSE; Error when unsupported or when `forward`
/// or `in.d_o` does not fit the shape.
emu::BackwardResult hopper_flash_backward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& shape,
                                          const emu::AttentionOperands& in, const emu::ForwardResult& forward);

/// The three kernels' seconds together in each of `repeats` runs on inputs uploaded once, after
/// one run that is not timed, by CUDA events (on the simulated GPU, the simulation's wall clock).
std::vector<double> time_hopper_flash_backward(const emu::AttentionRecipe& recipe, const emu::AttentionShape& shape,
                                               const emu::AttentionOperands& in, const emu::ForwardResult& forward,
                                               int repeats);

}  // namespace roundscope::gpu
