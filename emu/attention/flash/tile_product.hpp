#pragma once
// The tile products of the flash-attention emulator (internal to emu/attention/flash/flash_*.cpp):
// a recipe's tensor-core model prepared once, or exact float64 sums.
#include <cstdint>
#include <optional>
#include <vector>

#include "emu/attention/flash/flash_context.hpp"
#include "emu/mma/mma_gemm.hpp"

namespace roundscope::emu::detail {

/// One product of a recipe: its tensor-core model, prepared once, float64 (each element
/// C + sum A B with exact products summed in double, rounded once to float32), the AMX GEMM
/// of ATen's CPU kernel, on its packed path or not (amx_gemm.hpp), or a float32 FFMA chain.
class TileProduct {
public:
    TileProduct(const AttentionRecipe& recipe, const Format& a, const Format& b, Product kind, bool packed = false);
    /// D = A B + C, A [m][k], B [k][n], C and D float32 bits [m][n] (D may be C); C null: D = A B
    /// (a GEMM without C, whose first chunk adds no +0).
    void run(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c, std::uint32_t* d, std::uint64_t m,
             std::uint64_t n, std::uint64_t k) const;
    /// Whether k-steps whose A (or B) is all zero leave a D that starts from C = +0 as it is, so
    /// that a product may stop at its last non-zero step: true of the tensor-core models (each
    /// step's sum is re-aligned to the accumulator and a zero sum leaves +0, never -0) and of
    /// float64 sums; not of the FFMA chain (a -0 accumulator becomes +0) nor of the CPU GEMMs,
    /// whose blocking depends on k.
    bool zero_products_change_nothing() const { return kind_ == Product::model || kind_ == Product::exact_f64; }

private:
    std::optional<PreparedMma> mma_;
    Format a_, b_;
    Product kind_;
    bool packed_;
};

/// [rows][cols] (row stride `stride`) to [cols][rows], the columns [c0, c1) only.
std::vector<std::uint32_t> transposed(const std::uint32_t* x, std::uint64_t rows, std::uint64_t stride, Span cols);

}  // namespace roundscope::emu::detail
