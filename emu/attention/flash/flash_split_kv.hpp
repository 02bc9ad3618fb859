#pragma once
// PyTorch's split-KV flash forward (FlashAttention-2's flash_fwd_splitkv_kernel and
// flash_fwd_splitkv_combine_kernel, docs/gpu.md), which `torch-flash-sm90` runs where PyTorch
// would (torch_flash_splits): each split is the online softmax over its run of KV tiles, with
// PyTorch's epilogue but O left in float32 (O_accum) and an empty row's LSE -inf; the combine
// then forms, per query row, LSE = logf(sum_s expf(LSE_s - max)) + max and O = sum_s expf(LSE_s
// - LSE) O_s, as its SASS does: libdevice expf and logf (libdevice_math.hpp), the maximum and the
// sum over the splits by the butterfly of its warp lanes, the O sum by fused multiply-adds in
// split order from zero, O cast to the O format.
#include <cstdint>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_context.hpp"

namespace roundscope::emu {

/// The split kernel's tiles: 64 query rows, and 256, 128 or 64 keys for D <= 64, <= 128, more.
struct SplitKvTiles {
    int block_m = 64, block_n = 128;
};
SplitKvTiles split_kv_tiles(std::uint64_t d);

/// The keys of split s of `splits`: whole tiles, ceil(tiles / splits) of them to a split (the
/// last splits may have none).
Span split_keys(std::uint64_t n_kv, int block_n, int splits, int s);

/// The combine of the splits' forward passes (each with o_f32 the split's O_accum and lse its
/// LSE, natural log) into the result: O (o_format bits and o_f32 before the cast), LSE, and the
/// splits' counts added.
ForwardResult combine_splits(const FlashContext& ctx, const std::vector<ForwardResult>& splits);

}  // namespace roundscope::emu
