#pragma once
// ATen's CPU flash attention backward (FlashAttentionKernel.cpp, cpu_flash_attention_backward) on
// BF16 inputs on an Intel CPU with AVX512-BF16 and no AMX, and on an AMD CPU (whose MKL runs
// mkl_avx2_gemm.hpp's GEMM, alpha applied to K before the chain: S = Q RN(scale K)^T, where
// below it is applied after): for each query block (ATen's 32, 64 or 256 rows) and each KV block
// of 512 keys, in order,
//   S     = RN(scale x Q K^T)                  MKL's BF16 GEMM (avx512_bf16_gemm), alpha the scale
//   s     = RN(S + mask)                       an additive or boolean mask (-inf), where one is given
//   P     = SLEEF expf(RN(s - LSE))            Vectorized<float>::exp; 0 past a row's causal end
//   dV   += P_bf16^T dO                        oneDNN's brgemm (avx512_bf16_brgemm), added in float32
//   dP    = dO V^T                             MKL's BF16 GEMM
//   dS    = RN(P RN(dP - delta))               delta = rowsum(dO O) as map2_reduce_all sums it
//   dQ   += RN(scale x dS_bf16 K)              brgemm, the scale a source scale, then added
//   dK   += RN(scale x dS_bf16^T Q)
// where each "+=" adds in float32 to the BF16 gradient and rounds it back to BF16 (the gradients
// are BF16 tensors; the brgemm's sum post-op); with grouped heads, a key-value head's query heads
// in order add to the same dK and dV. On an AMD CPU, FP16 and float32 inputs take the same steps
// with their own GEMMs: float32 keeps P and dS unrounded and adds every gradient by MKL's SGEMM
// (beta = 1: mkl_avx2_gemm with C, alpha on Q for dK and on K for dQ); FP16 rounds P and dS to FP16
// and adds its FP16 gradients by ATen's own GEMM (aten_blas_gemm.hpp: dV and dK its gemm_transb_,
// dQ its gemm_notrans_). Found by probes against the installed torch
// (docs/torch-cpu.md); held to it by tests/peer/test_aten_cpu_torch.py. Internal to
// emu/attention/flash.
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_context.hpp"

namespace roundscope::emu::detail {

/// Why the recipe's products are not a CPU's whose backward is modelled (empty where they are):
/// both avx512-bf16 (Intel's AVX512-BF16) or both mkl-avx2 (an AMD CPU); AMX's is untested.
std::string aten_cpu_backward_products(const AttentionRecipe& r);

/// Whether the backward's keys are left as they are by default: ATen's loop and autograd's ops
/// have no choice of product, delta, order or quantization (both CPU backwards refuse others).
bool backward_keys_unset(const AttentionRecipe& r);

/// Why the shape or recipe is outside what the probes cover (empty where aten_cpu_backward runs
/// it): the products must be avx512-bf16 or mkl-avx2, the formats BF16 (or, with mkl-avx2, FP16 or
/// float32, the input's throughout), D between 32 and 384, no one-row
/// query block or one-key KV block (the BLAS's GEMV, not probed backward).
std::string aten_cpu_backward_refusal(const FlashContext& ctx);

/// dQ, dK, dV (bits of the input's format; dK and dV of the key-value heads) and delta (threads over key-value
/// heads: the same bits on any count).
BackwardResult aten_cpu_backward(const FlashContext& ctx, const AttentionOperands& in, const ForwardResult& forward,
                                 int threads);

}  // namespace roundscope::emu::detail
