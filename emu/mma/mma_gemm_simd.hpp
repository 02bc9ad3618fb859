#pragma once
// The vector kernel behind mma_gemm (mma_gemm.hpp): a few rows of D at a time, over the columns
// that fill whole vectors; each strip of B's columns is read for every row of the tile while it
// is in cache. Its inputs are decoded (B to floats, which hold every value of the input
// formats; A to doubles) and multiplied in doubles, which hold every product and every
// truncated block sum of the float32-accumulator models exactly:
//   a product of two significands of at most 11 bits has at most 22 bits; a truncated term is
//   an integer multiple of 2^(Emax - F) below 2^(F + 2) of them, and a block of 32 sums to less
//   than 2^33 of them, far inside the 53 bits of a double. Scaling by powers of two stays in
//   the normal range (|Emax - F| < 300).
#include <cstdint>

namespace roundscope::emu {

/// A value's alignment exponent when it is zero: so low that it never becomes Emax (the
/// accumulator, a term of every block, always has an exponent of at least e_zero).
inline constexpr double zero_alignment_exponent = -8192.0;

struct MmaSimdJob {
    // Decoded A rows ([rows][k_padded]) and B ([k_padded][n]): values and alignment exponents.
    const double* a_value;
    const double* a_exponent;
    // B is read once per row of A: held in 4 bytes an element, which every input format's values
    // fit exactly (bf16, fp16, tf32 and fp8 are all float32 values).
    const float* b_value;
    const std::int32_t* b_exponent;
    const std::uint32_t* c;  // float32 bits, [rows][n]
    std::uint32_t* d;        // float32 bits, [rows][n]
    std::int64_t rows, n, k_padded;
    // The block schedule of one instruction: k offsets in block order; block b is
    // order[block_begin[b] .. block_begin[b + 1]).
    int instruction_k;
    const int* order;
    const int* block_begin;
    int blocks;
    int alignment_bits, zero_exponent;
    bool e8m13;          // BlockRounding::rz_e8m13 (else rz_f32)
    bool c_added_after;  // AccumulatorEntry::added_after
};

/// Computes d[r][j] for every row r and j < the returned count (a multiple of the vector
/// length, at most n).
std::int64_t mma_row_simd(const MmaSimdJob& job);

}  // namespace roundscope::emu
