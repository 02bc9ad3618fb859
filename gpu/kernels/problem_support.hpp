#pragma once
// What the GPU kernels take of an attention problem beyond its recipe: whole problems with a
// bottom-right causal mask or none, one key-value head per query head, no soft cap. The rest
// of emu/attention/inputs/attention_mask.hpp (dense masks, windows, a top-left diagonal), grouped-query
// attention and soft-capping run on the emulator; a kernel refuses them rather than computing
// another problem.
#include <string>

#include "emu/attention/flash/flash_attention.hpp"
#include "lib/error.hpp"

namespace roundscope::gpu {

/// Why the kernels cannot run `sh` (empty: they can).
inline std::string problem_unsupported(const emu::AttentionShape& sh) {
    if (sh.query_rows) return "the GPU kernels run whole problems, not a sample of query rows";
    if (sh.mask) return "the GPU kernels take the causal flag alone, not a " + sh.mask->describe(sh.causal) + " mask";
    if (sh.kv_group != 1) return "the GPU kernels take one key-value head per query head (no grouped-query attention)";
    if (sh.softcap != 0) return "the GPU kernels do not cap scores (softcap)";
    return {};
}

/// Error with problem_unsupported's reason.
inline void require_problem(const emu::AttentionShape& sh) {
    if (const std::string why = problem_unsupported(sh); !why.empty()) throw Error(why);
}

}  // namespace roundscope::gpu
