#pragma once
// MKL's BF16 GEMM with float32 output (cblas_gemm_bf16bf16f32) as it runs on an AMD CPU, where
// MKL takes its AVX2 code path (mkl_blas_avx2_gemm_bf16bf16f32_*) even on a CPU with AVX512-BF16:
// the BF16 operands are widened to float32 (subnormals kept) and each element of C is a float32
// fused multiply-add chain over K in order from +0, no flush to zero. K is cut into blocks: up to
// 192 in one, below 384 in two (K / 2 rounded down, then the rest), longer in blocks of 192; C
// (the GEMM's beta = 1) gains the blocks in order. That is the kernel MKL picks for a GEMM of at
// least 24 rows of C by 4 columns (column-major m >= 24, n >= 4); smaller GEMMs run other
// kernels, not modelled. Found against the installed torch's MKL (oneMKL 2024.0) on an AMD EPYC
// (Zen 4) by calling the GEMM directly and through ATen (docs/torch-cpu.md).
#include <cstdint>

namespace roundscope::emu {

/// The K blocks' length for a reduction of k products (see above; the last block may be shorter).
std::uint64_t mkl_avx2_k_block(std::uint64_t k);

/// Whether MKL runs the modelled kernel for a column-major GEMM of m x n (see above).
constexpr bool mkl_avx2_modelled(std::uint64_t m, std::uint64_t n) { return m >= 24 && n >= 4; }

/// D = A B, or C + A B block by block where C is not null. A [m][k] and B [k][n] hold BF16 bit
/// patterns (one per uint32), C and D float32 bits [m][n]; D may be C. b_scale: the GEMM's alpha
/// where ATen's column-major call multiplies by it (S = scale K^T Q in the backward): MKL
/// multiplies the operand it packs, K (B here), by it in float32 before the chains.
void mkl_avx2_bf16_gemm(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c, std::uint32_t* d,
                        std::uint64_t m, std::uint64_t n, std::uint64_t k, float b_scale = 1.0f);

}  // namespace roundscope::emu
