#pragma once
// oneDNN's BF16 GEMM with float32 output as ATen's CPU flash attention calls it (cpublas::gemm,
// FlashAttentionKernel.cpp) on a CPU with AMX-BF16, found by hypothesis and test against the
// installed torch (tests/peer/test_aten_cpu_torch.py; docs/verification.md):
//   the reduction (K) is cut into chunks; in each, the even-indexed and the odd-indexed products
//   run in two float32 fused multiply-add chains from +0 (TDPBF16PS's two accumulators per
//   element, Intel SDM: inputs that are subnormal read as zero, subnormal results flush to zero),
//   the chunk's result is their sum, and C (when the GEMM has one) gains the chunks in order.
// The chunk depends on the call ATen makes. cpublas::gemm (oneDNN's BF16 GEMM with float32
// output): 32, the last chunk partial. cpublas::brgemm on operands ATen packed beforehand (its
// "need_pack" path, flash_context.hpp: aten_packed): K rounded up to even (a zero pads it) in
// equal chunks, the largest even divisor of it that is at most 32 (K = 48: two of 24; K = 80:
// four of 20; K = 74: 37 of 2). cpublas::gemm with one row or one column (a one-row query block,
// a one-key KV block) runs the GEMV (onednn_gemv.hpp), modelled on AVX512-BF16, untested on AMX.
// On an Intel CPU with AVX512-BF16 and no AMX, oneDNN's BF16 GEMM runs VDPBF16PS under its gemm
// driver's K blocking: K up to 384 (bk_traditional) in one block, K below 1536 (twice bk) in two
// of (K + 1) / 2 and the rest, longer K in blocks of 768. Each element's block is one float32
// chain in order from +0, over pairs of products from the block's start (an odd block's last
// pair has a zero), each pair in the order the Intel SDM's pseudo-code for VDPBF16PS gives (the
// odd one added first, then the even, each addition rounded; subnormal inputs read as zero,
// subnormal results flushed); C (when the GEMM has one) gains the blocks in order. Found as the
// AMX GEMM was (docs/torch-cpu.md). ATen never packs on such a CPU (packing needs AMX); its
// one-row and one-key GEMMs run the GEMV (onednn_gemv.hpp).
// The library: ATen's cpublas::gemm calls MKL's BF16 GEMM on x86 (MKL_VERBOSE prints
// GEMM_BF16BF16F32 for each call); its arithmetic is that of the kernels oneDNN publishes, which
// share its lineage, and is named after them here.
#include <cstdint>

namespace roundscope::emu {

/// The chunk of a reduction over k products, on the packed path or not (see above).
int amx_k_chunk(std::uint64_t k, bool packed);

/// D = A B, or C + A B chunk by chunk where C is not null. A [m][k] and B [k][n] hold BF16 bit
/// patterns (one per uint32), C and D float32 bits [m][n]; D may be C.
void amx_bf16_gemm(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c, std::uint32_t* d,
                   std::uint64_t m, std::uint64_t n, std::uint64_t k, int chunk);

/// The K block of the AVX512-BF16 GEMM for a reduction of k products (see above).
std::uint64_t avx512_bf16_k_block(std::uint64_t k);

/// The same GEMM on AVX512-BF16 (VDPBF16PS, see above); operands as amx_bf16_gemm's.
void avx512_bf16_gemm(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c, std::uint32_t* d,
                      std::uint64_t m, std::uint64_t n, std::uint64_t k);

/// D = A B as oneDNN's brgemm matmul on AVX512-BF16 (brg_matmul:avx512_core_bf16, which ATen's
/// CPU backward calls for its BF16 gradients) computes it before its post-ops: each element one
/// chain of VDPBF16PS pairs over the whole of K from +0 (at least up to K = 512, the longest the
/// backward asks: docs/torch-cpu.md). Operands as amx_bf16_gemm's.
void avx512_bf16_brgemm(const std::uint32_t* a, const std::uint32_t* b, std::uint32_t* d, std::uint64_t m,
                        std::uint64_t n, std::uint64_t k);

}  // namespace roundscope::emu
