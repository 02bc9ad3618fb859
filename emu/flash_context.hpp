#pragma once
// What the forward and backward emulators share (internal to emu/flash_*.cpp): the prepared
// tensor-core models, the tiles of a head, the causal rule, V as the PV product sees it, and a
// tile GEMM.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "emu/attention_recipe.hpp"
#include "emu/attention_steps.hpp"
#include "emu/flash_attention.hpp"
#include "emu/mma_gemm.hpp"
#include "emu/torch_softmax.hpp"

namespace roundscope::emu::detail {

/// A half-open range of rows or keys.
struct Span {
    std::uint64_t begin = 0, end = 0;
    std::uint64_t size() const { return end - begin; }
};

/// The blocks of `block` covering [0, n), in the given order.
std::vector<Span> blocks_of(std::uint64_t n, int block, KvOrder order = KvOrder::forward);

/// One product of a recipe: its tensor-core model, prepared once, or float64 (each element
/// C + sum A B with exact products summed in double, rounded once to float32).
class TileProduct {
public:
    TileProduct(const AttentionRecipe& recipe, const Format& a, const Format& b, Product kind);
    /// D = A B + C, A [m][k], B [k][n], C and D float32 bits [m][n] (D may be C).
    void run(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c, std::uint32_t* d, std::uint64_t m,
             std::uint64_t n, std::uint64_t k) const;

private:
    std::optional<PreparedMma> mma_;
    Format a_, b_;
};

/// D = A B + C through a recipe's product (TileProduct::run).
void tile_mma(const TileProduct& product, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
              std::uint32_t* d, std::uint64_t m, std::uint64_t n, std::uint64_t k);

/// [rows][cols] (row stride `stride`) to [cols][rows], the columns [c0, c1) only.
std::vector<std::uint32_t> transposed(const std::uint32_t* x, std::uint64_t rows, std::uint64_t stride, Span cols);

struct FlashContext {
    AttentionRecipe recipe;
    AttentionShape shape;
    float scale_log2 = 0;
    bool approx_exp2 = false;
    steps::OnlineSoftmax softmax{};
    torch_eager::TorchSoftmax torch{};  // the online-torch softmax's choices

    /// Keys [0, visible(i)) are seen by query row i (bottom-right causal alignment).
    std::uint64_t visible(std::uint64_t i) const;
    /// Whether no (row, key) of the tile is visible: such tiles are skipped.
    bool tile_masked(Span rows, Span keys) const;
    /// Under the diagonal fix: row i multiplies key j's V unquantized (steps::diagonal_key).
    bool diagonal_key(std::uint64_t i, std::uint64_t j) const;
};

FlashContext flash_context(const AttentionRecipe& recipe, const AttentionShape& shape);

/// The recipe's tensor-core model for x times y (float32 accumulators); Error naming the
/// recipe where there is none.
const MmaModel& model_for(const AttentionRecipe& recipe, const Format& x, const Format& y);

/// V as the PV product multiplies it: every head's V quantized along tokens in the recipe's
/// block format, dequantized and stored in the input format (Error where a value is not
/// exact there); empty without quantization.
std::vector<std::uint32_t> quantized_v(const FlashContext& ctx, const std::vector<std::uint32_t>& v);

/// delta = rowsum(dO * O) of every query (all heads), from O as stored or in float32 as the
/// recipe says (steps::delta_rowsum).
std::vector<float> delta_from_o(const FlashContext& ctx, const AttentionOperands& in, const ForwardResult& forward);

/// The input-format bits `x` in format `to` (Error naming `what` unless every value is exact).
std::vector<std::uint32_t> exact_in(const std::vector<std::uint32_t>& x, const Format& from, const Format& to,
                                    const char* what);

}  // namespace roundscope::emu::detail
