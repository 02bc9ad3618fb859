#include "emu/attention/attention_recipe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "emu/mma/mma_model.hpp"
#include "lib/error.hpp"

namespace roundscope::emu {

void validate(const AttentionRecipe& r) {
    auto fail = [&](std::string_view key, const std::string& why) {
        throw Error(fmt::format("recipe '{}': {} ({})", r.name, why, key));
    };
    if (r.score_product == Product::model && find_mma_model(r.arch, r.instruction, *r.input, *r.input, f32) == nullptr)
        fail("input",
             fmt::format("no {} {} model multiplies {} by {}", r.arch, r.instruction, r.input->name, r.input->name));
    if (r.pv_product == Product::model && find_mma_model(r.arch, r.instruction, *r.p_format, *r.input, f32) == nullptr)
        fail("p_format", fmt::format("no {} {} model multiplies P in {} by V in {}", r.arch, r.instruction,
                                     r.p_format->name, r.input->name));
    if (r.block_m % 16 != 0 || r.block_n % 16 != 0) fail("block_m/block_n", "tiles must be multiples of 16");
    if (r.v_quant != nullptr && r.diagonal_fix && r.block_n != 0 && r.block_n % r.v_block != 0)
        fail("v_block",
             fmt::format("the diagonal fix needs V blocks ({}) that divide block_n ({})", r.v_block, r.block_n));
    if ((r.softmax == SoftmaxKind::naive || r.softmax == SoftmaxKind::naive_unshifted) &&
        r.kv_order == KvOrder::reverse)
        fail("kv_order", "a naive softmax has no KV order");
    const bool flash2_choices = r.row_sum != RowSum::sequential || r.rescale_arg != RescaleArg::scaled ||
                                r.epilogue != Epilogue::fa2 || r.scale_log2 != ScaleLog2::float32 ||
                                r.exp2_arg != Exp2Arg::mul_sub;
    if (flash2_choices && r.softmax != SoftmaxKind::online)
        fail("softmax", "row_sum, rescale_arg, scale_log2, exp2_arg and epilogue are choices of the online softmax");
    if (r.p_quant != nullptr && r.softmax != SoftmaxKind::online)
        fail("p_quant", "P is block-quantized in the online softmax only");
    if (r.pv_depth == PvDepth::tile && (r.softmax != SoftmaxKind::online || r.diagonal_fix))
        fail("pv_depth", "P V over the whole tile is modelled for the online softmax without the diagonal fix");
    if (r.p_quant != nullptr && !(*r.p_format == bf16 || *r.p_format == f32))
        fail("p_quant", "the block-quantized P is held in bf16 or f32 for P V (every MX value fits them)");
    if (r.p_quant != nullptr && r.block_n % 32 != 0)
        fail("p_quant", "P's blocks of 32 keys must tile block_n (a multiple of 32)");
    if (r.p_quant != nullptr && r.epilogue != Epilogue::fa2)
        fail("p_quant", "P is block-quantized under FlashAttention-2's epilogue only");
    if (r.row_sum_format != nullptr && r.softmax == SoftmaxKind::online)
        fail("row_sum_format",
             "the online softmax keeps its row sum in float32; row_sum_format is a choice of the "
             "naive and online-torch softmax");
    if (r.softmax == SoftmaxKind::compiled_torch && r.row_sum_format != nullptr)
        fail("row_sum_format", "the compiled softmax never stores its row sum (it stays in float32)");
    if (r.softmax == SoftmaxKind::compiled_torch && r.p_scale != 1.0f)
        fail("p_scale", "the compiled softmax casts P-bar unscaled (p_scale 1)");
    if (r.delta_sum != DeltaSum::sequential && !(*r.delta_format == f32))
        fail("delta_sum", "the lanes' order is that of a float32 sum (delta_format f32)");
    if (r.grad_quant != nullptr && (r.block_m % 32 != 0 || r.block_n % 32 != 0))
        fail("grad_quant", "the gradient operands' blocks of 32 must tile block_m and block_n (multiples of 32)");
    if (r.grad_quant != nullptr && !(*r.ds_format == bf16 || *r.ds_format == f32))
        fail("grad_quant", "the block-quantized operands are held in ds_format bf16 or f32 (every MX value fits them)");
    if (r.grad_stochastic && r.grad_quant == nullptr)
        fail("grad_rounding", "stochastic rounding is grad_quant's (set a block format)");
    if (r.rescale_arg == RescaleArg::raw && r.max_adjust)
        fail("rescale_arg", "the raw maxima and the max adjustment exclude each other");
    if (r.epilogue == Epilogue::torch_flash && (r.p_scale != 1.0f || !(*r.o_accumulator == f32)))
        fail("epilogue", "PyTorch's flash epilogue has P unscaled (p_scale 1) and O accumulated in f32");
}

int resolved_block_n(const AttentionRecipe& r, std::uint64_t d) {
    if (r.block_n != 0) return r.block_n;
    if (d > 128)
        throw Error(fmt::format("recipe '{}': block_n=auto follows PyTorch's flash tiles for D <= 128 only (D is {})",
                                r.name, d));
    return d <= 64 ? 128 : 64;
}

// flash_api.cpp, num_splits_heuristic, with its float and double arithmetic.
int torch_flash_splits(std::uint64_t heads, std::uint64_t n_q, std::uint64_t n_kv, std::uint64_t d, int sms) {
    const int block_n = d <= 64 ? 256 : d <= 128 ? 128 : 64;
    const auto ceildiv = [](std::uint64_t a, std::uint64_t b) { return static_cast<int>((a + b - 1) / b); };
    const int n_blocks = ceildiv(n_kv, static_cast<std::uint64_t>(block_n));
    const double m_blocks = static_cast<double>(heads) * ceildiv(n_q, 64);
    const int slots = 2 * sms;  // the caller passes twice the SM count
    if (m_blocks >= static_cast<double>(0.8f * static_cast<float>(slots))) return 1;  // float, then compared in double
    const int batch_heads_mblocks = static_cast<int>(m_blocks);
    const int max_splits = std::min({128, slots, n_blocks});
    auto eligible = [&](int s) { return s == 1 || ceildiv(n_blocks, s) != ceildiv(n_blocks, s - 1); };
    float best = 0;
    std::vector<float> efficiency;
    for (int s = 1; s <= max_splits; ++s) {
        float eff = 0;
        if (eligible(s)) {
            const float waves = static_cast<float>(batch_heads_mblocks * s) / static_cast<float>(slots);
            eff = waves / std::ceil(waves);
            best = std::max(best, eff);
        }
        efficiency.push_back(eff);
    }
    for (int s = 1; s <= max_splits; ++s)
        if (eligible(s) &&
            static_cast<double>(efficiency[static_cast<std::size_t>(s - 1)]) >= 0.85 * static_cast<double>(best))
            return s;
    return 1;
}

}  // namespace roundscope::emu
