#pragma once
// The backward of PyTorch's math SDPA on a CPU (softmax=aten-cpu-math): autograd through the ops
// aten_cpu_math_forward.hpp composes, as torch 2.15 runs them on an AMD CPU: with P, q RN(sqrt(scale))
// and k RN(sqrt(scale)) (qs, ks) as the forward made them, and dO upcast to float32,
//   dV  = P^T dO                        MKL's batched SGEMM (mkl_avx2_gemm.hpp), then cast to the input's format
//   dP  = dO V^T                        the SGEMM
//   dS  = RN(RN(dP - dot) P)            _vec_host_softmax_backward_lastdim: dot = sum(dP P) as
//                                       map2_reduce_all forms it (under 16 keys in order, else 16 lanes)
//   dQ  = RN(RN(dS ks) RN(sqrt(scale))) the SGEMM, then the scale's root (the mul's backward), cast
//   dK  = RN(RN(dS^T qs) RN(sqrt(scale)))
// With grouped heads (enable_gqa) the math path repeats the upcast K and V over a group: a group's
// float32 dK and dV add in head order before the one cast. Found against the installed torch
// (docs/torch-cpu.md); held to it by
// tests/peer/test_aten_cpu_math_torch.py. Internal to emu/attention/flash.
#include <string>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_context.hpp"

namespace roundscope::emu::detail {

/// Why the shape or recipe is outside what the probes cover (empty where aten_cpu_math_backward
/// runs it): D under 12 (an SGEMM MKL runs with other kernels),
/// dS in float32 and the gradients in the input's format, the backward's other keys unset.
std::string aten_cpu_math_backward_refusal(const FlashContext& ctx);

/// dQ, dK, dV (grad_format bits; dK and dV of the key-value heads) and delta (the softmax
/// backward's row sums of dP P; threads over key-value heads: the same bits on any count).
BackwardResult aten_cpu_math_backward(const FlashContext& ctx, const AttentionOperands& in, int threads);

}  // namespace roundscope::emu::detail
