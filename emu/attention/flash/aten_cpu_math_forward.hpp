#pragma once
// PyTorch's math SDPA on a CPU (softmax=aten-cpu-math): what F.scaled_dot_product_attention runs
// there where its flash kernel does not take the call (V's head dimension other than Q's, or
// dropout), as aten/src/ATen/native/transformers/attention.cpp's
// _scaled_dot_product_attention_math composes it: q, k and v upcast to float32 (exact; BF16 and
// FP16 too, PyTorch's default), q and k each times RN(sqrt(scale)) (math_path_operands.hpp); S =
// q k^T by MKL's batched SGEMM (on an AMD CPU its AVX2 kernel: mkl_avx2_gemm.hpp, over the whole
// D); a mask added in float32 (ATen's causal mask and boolean masks as -inf); ATen's softmax
// (SoftMaxKernel.cpp, _vec_softmax_lastdim: the max, e = SLEEF expf(RN(s - m)), l by
// vec::reduce_all's 16 lanes, P = e RN(1 / l)); _safe_softmax's P = 0 for a row with no key; O =
// P V by the SGEMM over all keys, cast once to the output format. The math path returns no LSE:
// the recipe's is RN(m + logf(l)) (glibc), which no kernel wrote. Found against the installed
// torch on an AMD EPYC (docs/torch-cpu.md); held to it by tests/peer/test_aten_cpu_math_torch.py;
// its backward: aten_cpu_math_backward.hpp; the frame it shares with the GPU's: math_path_forward.hpp.
#include <cstdint>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_context.hpp"

namespace roundscope::emu::detail {

/// One row's softmax as _vec_softmax_lastdim computes it, x its n scores (masked ones -inf): P into
/// `p`, the max and the sum into m and l; false for a row of -inf only (_safe_softmax's zeros).
bool aten_cpu_math_softmax(const std::vector<float>& x, std::uint64_t n, std::vector<float>& p, float& m, float& l);

/// The rows `rows` of head `head` (q: that head's [n_q][d], k and v: its KV head's, input
/// bits) into `out`: O, o_f32, the recipe's LSE and the rows' counts (keys below skip_keys
/// uncounted, as ForwardOptions::uncounted_keys).
void aten_cpu_math_rows(const FlashContext& ctx, const std::uint32_t* q, const std::uint32_t* k, const std::uint32_t* v,
                        std::uint64_t head, Span rows, ForwardResult& out, std::uint64_t skip_keys);

}  // namespace roundscope::emu::detail
