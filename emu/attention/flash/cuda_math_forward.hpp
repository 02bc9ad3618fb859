#pragma once
// PyTorch's math SDPA on a GPU (softmax=cuda-math), as aten/src/ATen/native/transformers/
// attention.cpp's _scaled_dot_product_attention_math composes it for CUDA tensors and as the
// H100 captures' kernel lists show it (docs/gpu.md): q, k and v upcast to float32 (exact); q and
// k each multiplied by RN(sqrt(scale)), the root taken in double; S = q k^T by cuBLAS's float32
// GEMM; a mask added in float32 (masked keys -inf); ATen's softmax_warp_forward over the row
// (rows of up to 1024 keys: key it * 32 + lane in lane `lane`, the max joined by a butterfly,
// e = expf(RN(s - m)) by libdevice, each lane's e summed in order from +0, the lanes' sums joined
// by a butterfly of offsets 16 to 1, p = RN(e / l)); _safe_softmax's P = 0 for a row with no
// key; O = P V by the float32 GEMM, cast once to the output format. The math path returns no
// LSE: the recipe's is RN(m + logf(l)) (libdevice), which no kernel wrote. The frame it shares with the
// CPU's math path: math_path_forward.hpp.
#include <cstdint>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_context.hpp"

namespace roundscope::emu::detail {

/// The rows `rows` of head `head` (q: that head's [n_q][d], k and v: its KV head's, input
/// bits) into `out`: O, o_f32, the recipe's LSE and the rows' counts (keys below skip_keys
/// uncounted, as ForwardOptions::uncounted_keys).
void cuda_math_rows(const FlashContext& ctx, const std::uint32_t* q, const std::uint32_t* k, const std::uint32_t* v,
                    std::uint64_t head, Span rows, ForwardResult& out, std::uint64_t skip_keys);

}  // namespace roundscope::emu::detail
