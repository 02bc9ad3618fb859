#pragma once
// MKL's BF16 and FP16 GEMMs with float32 output (cblas_gemm_bf16bf16f32, cblas_gemm_f16f16f32),
// and its SGEMM, as they run on an AMD CPU, where MKL takes its AVX2 code path
// (mkl_blas_avx2_gemm_*f16f32_*, ..._sgemm_*) even on a CPU with AVX512-BF16: the operands are widened to float32
// (subnormals kept) and each element of C is a float32 fused multiply-add chain over K in order from +0, no flush to
// zero. K is cut into blocks: up to 192 in one; below 384 in two of K / 2 (rounded down), an odd K's last product a
// block of its own; longer in blocks of 192. C (the GEMM's beta = 1) gains the blocks in order. That is the kernel MKL
// picks for a GEMM of at least 24 rows of C by 4 columns (column-major m >= 24, n >= 4; SGEMM's edge differs, below);
// smaller GEMMs run other kernels, not modelled. Found against the installed torch's MKL (oneMKL 2024.0) on an AMD EPYC
// (Zen 4) by calling the GEMMs directly and through ATen (docs/torch-cpu.md).
#include <cstdint>
#include <vector>

#include "emu/numbers/format.hpp"

namespace roundscope::emu {

/// Where each of K's blocks ends, in order (see above).
std::vector<std::uint64_t> mkl_avx2_k_blocks(std::uint64_t k);

/// Whether MKL runs the modelled kernel for a column-major GEMM of m x n on `in` operands: BF16 and
/// FP16 from 24 x 4; float32 (SGEMM, the same blocks) from 12 rows by 4, 8 or at least 12 columns,
/// its other column counts' last columns running another kernel.
constexpr bool mkl_avx2_modelled(const Format& in, std::uint64_t m, std::uint64_t n) {
    if (in.bits == 32) return m >= 12 && (n == 4 || n == 8 || n >= 12);
    return m >= 24 && n >= 4;
}

/// The shapes mkl_avx2_modelled takes, in words.
constexpr const char* mkl_avx2_modelled_shapes(const Format& in) {
    return in.bits == 32 ? "at least 12 x 12, or 12 x 4 or 8" : "at least 24 x 4";
}

/// D = A B, or C + A B block by block where C is not null. A [m][k] and B [k][n] hold bit patterns
/// of `in` (bf16, f16 or f32; one per uint32), C and D float32 bits [m][n]; D may be C. b_scale: the
/// GEMM's alpha where ATen's column-major call multiplies by it (S = scale K^T Q in the backward):
/// MKL multiplies the operand it packs, K (B here), by it in float32 before the chains.
void mkl_avx2_gemm(const Format& in, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                   std::uint32_t* d, std::uint64_t m, std::uint64_t n, std::uint64_t k, float b_scale = 1.0f);

}  // namespace roundscope::emu
