#pragma once
// A kernel's forward outputs beside the operands it read, as a dump `roundscope compare` and
// `check` read (docs/cli.md): q, k, v in the recipe's input format, o in its output format and
// the natural-log lse, with the causal flag and softmax scale the kernel ran under. The GPU kit
// brings the Hopper kernel's raw answers back this way (gpu_sweep --dump, crosscheck --dump),
// so that CI checks the hardware's bits against the emulator on the CPU.
#include <map>
#include <string>

#include "emu/attention/flash/flash_attention.hpp"

namespace roundscope::gpu {

/// Writes the dump to `path` (whole or not at all); `provenance` goes into its metadata as
/// "roundscope.<key>". An Error for a problem a dump cannot state (a mask beyond the causal
/// flag, grouped-query heads, sampled rows, a soft cap) or a format no dtype stores.
void write_kernel_dump(const std::string& path, const emu::AttentionRecipe& recipe, const emu::AttentionShape& shape,
                       const emu::AttentionOperands& in, const emu::ForwardResult& out,
                       const std::map<std::string, std::string>& provenance);

}  // namespace roundscope::gpu
