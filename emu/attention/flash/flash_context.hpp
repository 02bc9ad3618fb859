#pragma once
// The contract between a recipe and a flash-attention kernel: what the emulator (flash_forward.cpp,
// flash_backward.cpp) and its CUDA twins (gpu/kernels/flash_attention.cu) both derive from a recipe and a
// shape before running a tile: the softmax's constants, the causal rule, the tiles' order, V as
// the PV product sees it, the operands in the gradient format, and delta from O. Both sides call
// these functions, so they cannot disagree on them.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/math/softcap.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/attention/softmax/torch_softmax.hpp"
#include "emu/mma/mma_model.hpp"

namespace roundscope::emu {

/// A half-open range of rows or keys.
struct Span {
    std::uint64_t begin = 0, end = 0;
    std::uint64_t size() const { return end - begin; }
};

/// The blocks of `block` covering [0, n), in the given order.
std::vector<Span> blocks_of(std::uint64_t n, int block, KvOrder order = KvOrder::forward);

struct FlashContext {
    AttentionRecipe recipe;
    AttentionShape shape;
    float scale_log2 = 0;
    Exp2Kind exp2 = Exp2Kind::software;
    steps::OnlineSoftmax softmax{};
    torch_eager::TorchSoftmax torch{};  // the online-torch softmax's choices
    // A split-KV forward (flash_split_kv.hpp: PyTorch's path, or kv_splits): how many splits the
    // shape takes (1: none), and within a split's pass, its keys and its epilogue (O in float32,
    // -inf for an empty row).
    int splits = 1;
    Span split_keys{0, ~std::uint64_t{0}};
    bool split_pass = false;
    // A soft cap (softcap.hpp): the score product becomes capped_score(s) before the softmax,
    // whose constant is then softcap.scale_log2.
    bool softcapped = false;
    SoftcapConstants softcap{};
    // Under scale_log2=scale-first: the float32 scale each score is multiplied by (and rounded)
    // before the softmax, whose constant is then RN(log2 e) (prescaled_scores); 0: none.
    float score_prescale = 0;
    bool aten_packed = false;  // the AMX GEMM on ATen's packed path (aten_packed below)
    /// How many KV tiles (buckets, in the released PyTorch code's word) the keys fill.
    std::uint64_t kv_buckets() const {
        const auto n = static_cast<std::uint64_t>(recipe.tiles.block_n);
        return (shape.n_kv + n - 1) / n;
    }
    /// What dQ and dK are multiplied by at the end: the scale, or under a soft cap the cap.
    float dk_dq_scale() const { return softcapped ? softcap.cap : shape.scale; }

    /// Keys [0, visible(i)) may be seen by query row i: the end of its band (attention_mask.hpp).
    std::uint64_t visible(std::uint64_t i) const;
    /// Whether the band (causal, window) leaves no (row, key) of the tile: such tiles are skipped,
    /// as FlashAttention skips them. A dense mask's tiles all run (masked keys give P = 0).
    bool tile_masked(Span rows, Span keys) const;
    /// The bias of each (row, key) of the tile in exp2's units, RN(RN(b) log2 e) with b the mask's
    /// value rounded to float32: 0, finite, or -inf (masked: a dense mask's, or before the window's
    /// start), [rows][keys]; empty where no key of the shape has one (has_key_bias).
    std::vector<float> tile_bias(std::uint64_t head, Span rows, Span keys) const;
    /// The same in natural units: RN(b), or -inf where masked (ATen's CPU softmax adds it to S scale).
    std::vector<float> tile_mask(std::uint64_t head, Span rows, Span keys) const;
    /// Under the diagonal fix: row i multiplies key j's V unquantized (steps::diagonal_key).
    bool diagonal_key(std::uint64_t i, std::uint64_t j) const;
};

/// The recipe validated and its constants derived for `shape`.
FlashContext flash_context(const AttentionRecipe& recipe, const AttentionShape& shape);

/// The recipe's tensor-core model for x times y (float32 accumulators); Error naming the
/// recipe where there is none.
const MmaModel& model_for(const AttentionRecipe& recipe, const Format& x, const Format& y);

/// ATen's CPU flash attention's query block for n_q queries (flash_attention_kernel_impl): 256
/// rows from 768 queries on, 64 from 192, else 32, at most n_q.
std::uint64_t aten_query_block(std::uint64_t n_q);

/// Whether ATen's CPU flash attention takes its packed path for this shape (need_pack in
/// cpu_flash_attention, BF16): both lengths at least 64, and each thread's GEMM work at least
/// four times the packing's, which depends on the thread count (recipe key aten_threads).
/// With aten_threads 0 (unknown), Error where the choice turns on it. False unless the recipe
/// computes a product by the AMX GEMM.
bool aten_packed(const AttentionRecipe& recipe, const AttentionShape& shape);

/// V as the PV product multiplies it: every head's V quantized along tokens in the recipe's
/// block format, dequantized and stored in the input format (Error where a value is not
/// exact there); empty without quantization.
std::vector<std::uint32_t> quantized_v(const FlashContext& ctx, const std::vector<std::uint32_t>& v);

/// The operands with Q and K quantized along D in the recipe's qk_quant block format (blocks of
/// 32), dequantized and stored in the input format (Error where a value is not exact there);
/// the operands as they are without it.
AttentionOperands quantized_qk(const FlashContext& ctx, const AttentionOperands& in);

/// x (bits of `held`, shaped `dims`) quantized in blocks of `block` along `axis` in `format`
/// (its elements rounded under `elements`), dequantized and given as bits of `to` (Error naming
/// `what` where a value is not exact there).
std::vector<std::uint32_t> block_fake_quantized(const std::vector<std::uint32_t>& x, const Format& held,
                                                std::vector<std::uint64_t> dims, int axis, const BlockFormat& format,
                                                int block, const Format& to, const char* what,
                                                const CastOptions& elements = {});

/// One row's delta = rowsum(dO * O) from n elements of dO (the recipe's input format) and of O
/// (o_format), summed as the recipe says: steps::delta_rowsum, or under delta_sum=lanes16|32
/// the float32 products in Inductor's lanes (inductor::lane_sum).
float recipe_delta_row(const AttentionRecipe& recipe, const std::uint32_t* d_o, const std::uint32_t* o,
                       const Format& o_format, int n);

/// delta = rowsum(dO * O) of every query (all heads), from O as stored or in float32 as the
/// recipe says (recipe_delta_row).
std::vector<float> delta_from_o(const FlashContext& ctx, const AttentionOperands& in, const ForwardResult& forward);

/// The bits `x` of format `from` in format `to` (Error naming `what` unless every value is exact).
std::vector<std::uint32_t> exact_in(const std::vector<std::uint32_t>& x, const Format& from, const Format& to,
                                    const char* what);

}  // namespace roundscope::emu
