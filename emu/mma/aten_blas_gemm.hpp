#pragma once
// ATen's own GEMM on FP16 operands (aten/src/ATen/native/cpu/BlasKernel.cpp), which cpublas::gemm
// falls back to for an FP16 destination on a CPU without AVX512-FP16 or AMX-FP16 (oneDNN declines
// it, and an MKL build has no shgemm): ATen's CPU flash backward adds its FP16 gradients with it.
// Its two loops, by the GEMM's transposes (column-major, as ATen calls them):
// - gemm_notrans_ (neither transposed): each element of C a float32 dot over K in ATen's sum():
//   four partial sums (product l into sum l mod 4 over K's whole groups of four, the rest into
//   sum 0), folded 0 + 1, + 2, + 3; then C = RN_fp16(RN(C + RN(alpha x dot))).
// - gemm_transb_ (B transposed): C widened to float32; for each l of K in order, val =
//   RN(alpha x B[l]) and C = fma(A[l], val, C) (the compiler fuses the loop's multiply-add);
//   C rounded back to FP16 at the end.
// The products of two FP16 values are exact in float32, so fusing is moot where alpha is 1.
// Found against the installed torch on an AMD EPYC (docs/torch-cpu.md).
#include <cstdint>

#include "emu/numbers/format.hpp"

namespace roundscope::emu {

/// gemm_notrans_: C += alpha A B (row-major here: A [m][k], B [k][n], C [m][n], all `in` bit
/// patterns, one per uint32), each element's dot in four partial sums, C rounded back to `in`.
void aten_blas_gemm_dot_add(const Format& in, const std::uint32_t* a, const std::uint32_t* b, std::uint32_t* c,
                            std::uint64_t m, std::uint64_t n, std::uint64_t k, float alpha);

/// gemm_transb_: C += alpha A B as one fused chain per element over k in order from C, with alpha
/// applied to A (ATen's B: the operand it scales) before the chain; C rounded back to `in`.
void aten_blas_gemm_axpy_add(const Format& in, const std::uint32_t* a, const std::uint32_t* b, std::uint32_t* c,
                             std::uint64_t m, std::uint64_t n, std::uint64_t k, float alpha);

}  // namespace roundscope::emu
