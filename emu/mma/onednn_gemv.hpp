#pragma once
// oneDNN's BF16 GEMV with float32 output on AVX512-BF16 (jit_avx512_core_gemv_bf16bf16f32_kern,
// reached through gemv_driver.cpp's jump_to_gemv when a GEMM has one row or one column and is
// not packed): ATen's CPU flash attention runs it for a query block of one row (decoding one
// token) and a KV block of one key. Two kernels, by the matrix's orientation:
//   dot (A transposed, each output a dot product over k): 16 float32 lanes, lane l taking
//   elements 32 s + 2 l and 32 s + 2 l + 1 as one VDPBF16PS pair per 32 elements (the tail
//   padded with zeros); then the lanes summed as innerloop_t reduces them: lanes l and l + 8,
//   then neighbours twice (vhaddps), ((t0 + t1) + (t2 + t3)) + ((t4 + t5) + (t6 + t7)).
//   rows (A not transposed, y[c] = sum over k of x[t] A[t][c]): the reduction in groups of 8
//   (innerloop_n's unroll), each a chain of VDPBF16PS pairs from +0 added to y in order
//   (vfmadd231ps with alpha 1). oneDNN's threading driver may split that reduction among
//   threads; under ATen it did not, at 1 to 8 threads, even for one head of one query, which
//   runs outside ATen's parallel region (docs/torch-cpu.md), so one part is modelled.
// Checked against the installed torch (tests/peer/test_aten_cpu_torch.py; docs/torch-cpu.md).
#include <cstdint>

namespace roundscope::emu {

/// sum over t < k of x[t] a[t] (BF16 bit patterns, one per uint32) as the transposed GEMV's
/// kernel computes one output; the GEMV's y then gains it to +0 (beta 0), which this includes.
float avx512_bf16_gemv_dot(const std::uint32_t* x, const std::uint32_t* a, std::uint64_t k);

/// y[c] = C[c] + sum over t < k of x[t] A[t][c], for c < n, as the non-transposed GEMV computes
/// it (above); x [k] and A [k][n] BF16 bit patterns, C and y float32 bits (C null: beta 0, y
/// from +0); y may be C.
void avx512_bf16_gemv_rows(const std::uint32_t* x, const std::uint32_t* a, const std::uint32_t* c, std::uint32_t* y,
                           std::uint64_t k, std::uint64_t n);

}  // namespace roundscope::emu
