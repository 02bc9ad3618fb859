#include "emu/attention/recipe/attention_recipe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "emu/mma/mma_model.hpp"
#include "lib/error.hpp"

namespace roundscope::emu {

namespace {

// The rules across keys, stage by stage (the stages of recipe_key_table): each names the key it
// refuses and why.
class Rules {
public:
    explicit Rules(const AttentionRecipe& r) : r_(r) {}

    // target: a tensor-core model for every product the recipe computes by one.
    void target() const {
        if (r_.score_product == Product::model &&
            find_mma_model(r_.arch, r_.instruction, *r_.input, *r_.input, f32) == nullptr)
            fail("input", fmt::format("no {} {} model multiplies {} by {}", r_.arch, r_.instruction, r_.input->name,
                                      r_.input->name));
        if (r_.pv_product == Product::model &&
            find_mma_model(r_.arch, r_.instruction, *r_.p_format, *r_.input, f32) == nullptr)
            fail("p_format", fmt::format("no {} {} model multiplies P in {} by V in {}", r_.arch, r_.instruction,
                                         r_.p_format->name, r_.input->name));
        const bool amx = r_.score_product == Product::amx || r_.pv_product == Product::amx;
        if (amx && !(*r_.input == bf16)) fail("input", "the AMX GEMM multiplies BF16 (input bf16)");
        if (r_.pv_product == Product::amx && !(*r_.p_format == bf16))
            fail("p_format", "the AMX GEMM multiplies P in BF16 (p_format bf16)");
        if (r_.aten_threads != 0 && !amx)
            fail("aten_threads", "the thread count chooses the AMX GEMM's path; no product of this recipe takes it");
    }

    void tiles() const {
        if (r_.block_m % 16 != 0 || r_.block_n % 16 != 0) fail("block_m/block_n", "tiles must be multiples of 16");
    }

    void softmax() const {
        const bool naive = r_.softmax == SoftmaxKind::naive || r_.softmax == SoftmaxKind::naive_unshifted;
        if (naive && r_.kv_order == KvOrder::reverse) fail("kv_order", "a naive softmax has no KV order");
        const bool flash2_choices = r_.row_sum != RowSum::sequential || r_.rescale_arg != RescaleArg::scaled ||
                                    r_.epilogue != Epilogue::fa2 || r_.scale_log2 != ScaleLog2::float32 ||
                                    r_.exp2_arg != Exp2Arg::mul_sub;
        if (flash2_choices && r_.softmax != SoftmaxKind::online)
            fail("softmax",
                 "row_sum, rescale_arg, scale_log2, exp2_arg and epilogue are choices of the online softmax");
        if (r_.row_sum_format != nullptr && r_.softmax == SoftmaxKind::online)
            fail("row_sum_format",
                 "the online softmax keeps its row sum in float32; row_sum_format is a choice of the "
                 "naive and online-torch softmax");
        if (r_.softmax == SoftmaxKind::compiled_torch && r_.row_sum_format != nullptr)
            fail("row_sum_format", "the compiled softmax never stores its row sum (it stays in float32)");
        if (r_.softmax == SoftmaxKind::compiled_torch && r_.p_scale != 1.0f)
            fail("p_scale", "the compiled softmax casts P-bar unscaled (p_scale 1)");
        if (r_.softmax == SoftmaxKind::aten_cpu) aten_cpu();
        if (r_.rescale_arg == RescaleArg::raw && r_.max_adjust)
            fail("rescale_arg", "the raw maxima and the max adjustment exclude each other");
    }

    // ATen's CPU softmax: natural exp, P-bar cast unscaled, O and l in float32, KV blocks in order.
    void aten_cpu() const {
        if (!(*r_.input == bf16))
            fail("input",
                 "ATen's CPU flash attention is modelled for BF16 inputs (f16 and f32 run other GEMMs and exps)");
        if (r_.kv_order != KvOrder::forward) fail("kv_order", "ATen's CPU flash attention walks the KV blocks forward");
        if (r_.exp2 != Exp2Kind::software)
            fail("exp2", "ATen's CPU softmax takes natural exps (fexp_u20 and expf), no exp2 (leave exp2=software)");
        if (r_.max_adjust) fail("max_adjust", "ATen's CPU softmax has no max adjustment");
        if (r_.p_scale != 1.0f) fail("p_scale", "ATen's CPU softmax casts P-bar unscaled (p_scale 1)");
        if (!(*r_.softmax_format == f32) || r_.row_sum_format != nullptr)
            fail("softmax_format", "ATen's CPU softmax keeps S, m and l in float32");
        if (!(*r_.o_accumulator == f32)) fail("o_accumulator", "ATen's CPU flash attention accumulates O in float32");
    }

    // P and V: the quantization of P and V, and how far P V runs.
    void p_and_v() const {
        if (r_.v_quant != nullptr && r_.diagonal_fix && r_.block_n != 0 && r_.block_n % r_.v_block != 0)
            fail("v_block",
                 fmt::format("the diagonal fix needs V blocks ({}) that divide block_n ({})", r_.v_block, r_.block_n));
        if (r_.p_quant != nullptr && r_.softmax != SoftmaxKind::online)
            fail("p_quant", "P is block-quantized in the online softmax only");
        if (r_.pv_depth == PvDepth::tile && (r_.softmax != SoftmaxKind::online || r_.diagonal_fix))
            fail("pv_depth", "P V over the whole tile is modelled for the online softmax without the diagonal fix");
        if (r_.p_quant != nullptr && !(*r_.p_format == bf16 || *r_.p_format == f32))
            fail("p_quant", "the block-quantized P is held in bf16 or f32 for P V (every MX value fits them)");
        if (r_.p_quant != nullptr && r_.block_n % 32 != 0)
            fail("p_quant", "P's blocks of 32 keys must tile block_n (a multiple of 32)");
        if (r_.p_quant != nullptr && r_.epilogue != Epilogue::fa2)
            fail("p_quant", "P is block-quantized under FlashAttention-2's epilogue only");
    }

    void output() const {
        if (r_.epilogue == Epilogue::torch_flash && (r_.p_scale != 1.0f || !(*r_.o_accumulator == f32)))
            fail("epilogue", "PyTorch's flash epilogue has P unscaled (p_scale 1) and O accumulated in f32");
    }

    void backward() const {
        if (r_.delta_sum != DeltaSum::sequential && !(*r_.delta_format == f32))
            fail("delta_sum", "the lanes' order is that of a float32 sum (delta_format f32)");
        if (r_.grad_quant != nullptr && (r_.block_m % 32 != 0 || r_.block_n % 32 != 0))
            fail("grad_quant", "the gradient operands' blocks of 32 must tile block_m and block_n (multiples of 32)");
        if (r_.grad_quant != nullptr && !(*r_.ds_format == bf16 || *r_.ds_format == f32))
            fail("grad_quant",
                 "the block-quantized operands are held in ds_format bf16 or f32 (every MX value fits them)");
        if (r_.grad_stochastic && r_.grad_quant == nullptr)
            fail("grad_rounding", "stochastic rounding is grad_quant's (set a block format)");
    }

private:
    [[noreturn]] void fail(std::string_view key, const std::string& why) const {
        throw Error(fmt::format("recipe '{}': {} ({})", r_.name, why, key));
    }

    const AttentionRecipe& r_;
};

}  // namespace

void validate(const AttentionRecipe& r) {
    const Rules rules(r);
    rules.target();
    rules.tiles();
    rules.softmax();
    rules.p_and_v();
    rules.output();
    rules.backward();
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
