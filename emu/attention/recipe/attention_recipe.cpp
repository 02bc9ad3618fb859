#include "emu/attention/recipe/attention_recipe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "emu/mma/mma_model.hpp"
#include "lib/error.hpp"

namespace roundscope::emu {

namespace {

// One refusal for the online softmax's choices, whichever stage holds the key (the softmax's own
// row_sum, rescale_arg, exp2_arg; the scores' scale_log2; the output's epilogue).
constexpr const char* online_choices =
    "row_sum, rescale_arg, scale_log2, exp2_arg and epilogue are choices of the online softmax";

[[noreturn]] void fail(std::string_view recipe, std::string_view key, const std::string& why) {
    throw Error(fmt::format("recipe '{}': {} ({})", recipe, why, key));
}

}  // namespace

// Each stage's own rules: each names the key it refuses and why.

void TileStage::validate(std::string_view recipe) const {
    if (block_m % 16 != 0 || (block_n != block_n_fa3_fp8 && block_n != block_n_mem_eff && block_n % 16 != 0))
        fail(recipe, "block_m/block_n", "tiles must be multiples of 16");
}

void SoftmaxStage::validate(std::string_view recipe) const {
    if ((row_sum != RowSum::sequential || rescale_arg != RescaleArg::scaled || exp2_arg != Exp2Arg::mul_sub) &&
        kind != SoftmaxKind::online)
        fail(recipe, "softmax", online_choices);
    if (row_sum_format != nullptr && kind == SoftmaxKind::online)
        fail(recipe, "row_sum_format",
             "the online softmax keeps its row sum in float32; row_sum_format is a choice of the "
             "naive and online-torch softmax");
    if (kind == SoftmaxKind::aten_cpu) {
        // ATen's CPU softmax: natural exps, S, m and l in float32.
        if (exp2 != Exp2Kind::software)
            fail(recipe, "exp2",
                 "ATen's CPU softmax takes natural exps (fexp_u20 and expf), no exp2 (leave exp2=software)");
        if (max_adjust) fail(recipe, "max_adjust", "ATen's CPU softmax has no max adjustment");
        if (!(*format == f32) || row_sum_format != nullptr)
            fail(recipe, "softmax_format", "ATen's CPU softmax keeps S, m and l in float32");
    }
    if (kind == SoftmaxKind::cuda_math || kind == SoftmaxKind::aten_cpu_math) {
        // PyTorch's math path: libdevice's expf (SLEEF's on a CPU), S, m, l and P in float32.
        if (exp2 != Exp2Kind::software)
            fail(recipe, "exp2", "PyTorch's math path takes a natural expf, no exp2 (leave exp2=software)");
        if (max_adjust) fail(recipe, "max_adjust", "PyTorch's math path has no max adjustment");
        if (!(*format == f32) || row_sum_format != nullptr)
            fail(recipe, "softmax_format", "PyTorch's math path keeps S, m, l and P in float32");
    }
    if (rescale_arg == RescaleArg::raw && max_adjust)
        fail(recipe, "rescale_arg", "the raw maxima and the max adjustment exclude each other");
    if (max_offset != 0 && kind != SoftmaxKind::online)
        fail(recipe, "max_offset", "the max offset is a choice of the online softmax");
    if (max_offset != 0 && max_adjust)
        fail(recipe, "max_offset", "the max offset and the max adjustment both move the max: choose one");
}

void PvStage::validate(std::string_view recipe) const {
    if (depth == PvDepth::tile && diagonal_fix)
        fail(recipe, "pv_depth", "P V over the whole tile is modelled for the online softmax without the diagonal fix");
    if (p_quant != nullptr && !(*p_format == bf16 || *p_format == f32))
        fail(recipe, "p_quant", "the block-quantized P is held in bf16 or f32 for P V (every MX value fits them)");
}

void BackwardStage::validate(std::string_view recipe) const {
    if (delta_sum != DeltaSum::sequential && !(*delta_format == f32))
        fail(recipe, "delta_sum", "the lanes' order is that of a float32 sum (delta_format f32)");
    if (quant != nullptr && !(*ds_format == bf16 || *ds_format == f32))
        fail(recipe, "grad_quant",
             "the block-quantized operands are held in ds_format bf16 or f32 (every MX value fits them)");
    if (stochastic && quant == nullptr)
        fail(recipe, "grad_rounding", "stochastic rounding is grad_quant's (set a block format)");
}

namespace {

// The rules across stages, stage by stage: each names the key it refuses and why.
class CrossRules {
public:
    explicit CrossRules(const AttentionRecipe& r) : r_(r) {}

    // target: a tensor-core model for every product the recipe computes by one.
    void target() const {
        const TargetStage& t = r_.target;
        if (r_.scores.product == Product::model &&
            find_mma_model(t.arch, t.instruction, *t.input, *t.input, f32) == nullptr)
            fail("input", fmt::format("no {} {} model multiplies {} by {}", t.arch, t.instruction, t.input->name,
                                      t.input->name));
        if (r_.p_and_v.product == Product::model &&
            find_mma_model(t.arch, t.instruction, *r_.p_and_v.p_format, *t.input, f32) == nullptr)
            fail("p_format", fmt::format("no {} {} model multiplies P in {} by V in {}", t.arch, t.instruction,
                                         r_.p_and_v.p_format->name, t.input->name));
        const bool amx = r_.scores.product == Product::amx || r_.p_and_v.product == Product::amx;
        // MKL's AVX2 kernels multiply BF16, FP16 or float32 (the same blocks for each); AMX's and
        // VDPBF16PS's BF16
        const auto takes = [](Product p, const Format& f) {
            return f == bf16 || (p == Product::mkl_avx2 && (f == f16 || f == f32));
        };
        // (the math path upcasts first: its GEMMs multiply float32, aten_cpu_math())
        const bool math = r_.softmax.kind == SoftmaxKind::aten_cpu_math;
        for (const Product p : {r_.scores.product, r_.p_and_v.product})
            if (cpu_bf16_gemm(p) && !takes(p, *t.input) && !math)
                fail("input",
                     p == Product::mkl_avx2
                         ? "MKL's AVX2 GEMM (mkl-avx2) multiplies BF16, FP16 or float32 (input bf16, f16 or f32)"
                         : "the CPU's BF16 GEMM (amx, avx512-bf16) multiplies BF16 (input bf16)");
        if (cpu_bf16_gemm(r_.p_and_v.product) && !(*r_.p_and_v.p_format == *t.input) && !math)
            fail("p_format",
                 "the CPU's GEMM (amx, avx512-bf16, mkl-avx2) multiplies P in V's format (p_format as input)");
        if (r_.tiles.aten_threads != 0 && !amx)
            fail("aten_threads", "the thread count chooses the AMX GEMM's path; no product of this recipe takes it");
    }

    void softmax() const {
        const SoftmaxStage& s = r_.softmax;
        if (s.naive() && r_.tiles.kv_order == KvOrder::reverse) fail("kv_order", "a naive softmax has no KV order");
        if ((r_.output.epilogue != Epilogue::fa2 || r_.scores.scale_log2 != ScaleLog2::float32) &&
            s.kind != SoftmaxKind::online)
            fail("softmax", online_choices);
        if (s.kind == SoftmaxKind::compiled_torch && r_.p_and_v.p_scale != 1.0f)
            fail("p_scale", "the compiled softmax casts P-bar unscaled (p_scale 1)");
        if (r_.target.cpu_vector != CpuVector::avx512 && s.kind != SoftmaxKind::compiled_torch)
            fail("cpu_vector",
                 s.kind == SoftmaxKind::aten_cpu || s.kind == SoftmaxKind::aten_cpu_math
                     ? "ATen's CPU attention is modelled as its AVX-512 build runs (cpu_vector=avx512)"
                     : "the CPU's vectors are a choice of PyTorch's CPU code (softmax=compiled-torch takes avx2)");
        if (r_.tiles.kv_splits > 1 && s.kind != SoftmaxKind::online)
            fail("kv_splits", "KV is split and combined under the online softmax only");
        if (r_.tiles.kv_splits > 1 && r_.tiles.split_kv_sms > 0)
            fail("kv_splits", "split_kv_sms chooses the split as PyTorch does: set kv_splits=1 with it");
        if (s.kind == SoftmaxKind::aten_cpu) aten_cpu();
        if (s.kind == SoftmaxKind::cuda_math) cuda_math();
        if (s.kind == SoftmaxKind::aten_cpu_math) aten_cpu_math();
        for (const auto& [key, product] :
             {std::pair{"score_product", r_.scores.product}, std::pair{"pv_product", r_.p_and_v.product}})
            if (product == Product::ffma && s.kind != SoftmaxKind::cuda_math)
                fail(key, "the FFMA chains are the float32 GEMMs of PyTorch's math path (softmax=cuda-math)");
    }

    // PyTorch's math path on a GPU: float32 GEMMs (cuBLAS's, or exact), P in float32, O cast once.
    void cuda_math() const {
        const Format& in = *r_.target.input;
        if (!(in == bf16 || in == f16 || in == f32))
            fail("input", "PyTorch's math path takes bf16, f16 or f32 tensors");
        for (const auto& [key, product] :
             {std::pair{"score_product", r_.scores.product}, std::pair{"pv_product", r_.p_and_v.product}})
            if (product != Product::ffma && product != Product::exact_f64)
                fail(key, "PyTorch's math path multiplies by cuBLAS's float32 GEMMs (ffma, or f64 for exact ones)");
        if (r_.tiles.kv_order != KvOrder::forward) fail("kv_order", "PyTorch's math path sums the keys in order");
        if (!(*r_.p_and_v.p_format == f32) || r_.p_and_v.p_scale != 1.0f)
            fail("p_format", "PyTorch's math path multiplies V by P in float32, unscaled (p_format f32, p_scale 1)");
        if (r_.scores.qk_quant != nullptr || r_.p_and_v.v_quant != nullptr)
            fail(r_.scores.qk_quant != nullptr ? "qk_quant" : "v_quant", "PyTorch's math path quantizes nothing");
        if (!(*r_.output.accumulator == f32)) fail("o_accumulator", "PyTorch's math path accumulates O in float32");
    }

    // PyTorch's math path on a CPU: the inputs upcast, MKL's float32 GEMMs (or exact ones), P in
    // float32, O cast once.
    void aten_cpu_math() const {
        const Format& in = *r_.target.input;
        if (!(in == bf16 || in == f16 || in == f32))
            fail("input", "PyTorch's math path takes bf16, f16 or f32 tensors");
        for (const auto& [key, product] :
             {std::pair{"score_product", r_.scores.product}, std::pair{"pv_product", r_.p_and_v.product}})
            if (product != Product::mkl_avx2 && product != Product::exact_f64)
                fail(key,
                     "PyTorch's math path on a CPU multiplies by MKL's float32 GEMM, modelled on an AMD CPU "
                     "(mkl-avx2, or f64 for exact ones)");
        if (r_.tiles.kv_order != KvOrder::forward) fail("kv_order", "PyTorch's math path sums the keys in order");
        if (!(*r_.p_and_v.p_format == f32) || r_.p_and_v.p_scale != 1.0f)
            fail("p_format", "PyTorch's math path multiplies V by P in float32, unscaled (p_format f32, p_scale 1)");
        if (r_.scores.qk_quant != nullptr || r_.p_and_v.v_quant != nullptr)
            fail(r_.scores.qk_quant != nullptr ? "qk_quant" : "v_quant", "PyTorch's math path quantizes nothing");
        if (!(*r_.output.accumulator == f32)) fail("o_accumulator", "PyTorch's math path accumulates O in float32");
    }

    // ATen's CPU flash attention: BF16, FP16 or float32 inputs, P-bar cast unscaled, O in float32, KV
    // blocks in order.
    void aten_cpu() const {
        // BF16, FP16 and float32 (the kernel's scalar_t); which CPU's GEMMs take FP16 and float32 is
        // the products' rule (target(): mkl-avx2, not amx or avx512-bf16)
        const Format& in = *r_.target.input;
        if (!(in == bf16) && !(in == f16) && !(in == f32))
            fail("input", "ATen's CPU flash attention runs BF16, FP16 and float32 inputs");
        if (r_.tiles.kv_order != KvOrder::forward)
            fail("kv_order", "ATen's CPU flash attention walks the KV blocks forward");
        if (r_.p_and_v.p_scale != 1.0f) fail("p_scale", "ATen's CPU softmax casts P-bar unscaled (p_scale 1)");
        if (!(*r_.output.accumulator == f32))
            fail("o_accumulator", "ATen's CPU flash attention accumulates O in float32");
    }

    // P and V: the quantization of P and V, and how far P V runs, against the tiles and softmax.
    void p_and_v() const {
        const PvStage& p = r_.p_and_v;
        const int block_n = r_.tiles.block_n;
        if (p.v_quant != nullptr && p.diagonal_fix && block_n > 0 && block_n % p.v_block != 0)
            fail("v_block",
                 fmt::format("the diagonal fix needs V blocks ({}) that divide block_n ({})", p.v_block, block_n));
        if (p.p_quant != nullptr && r_.softmax.kind != SoftmaxKind::online)
            fail("p_quant", "P is block-quantized in the online softmax only");
        if (p.depth == PvDepth::tile && r_.softmax.kind != SoftmaxKind::online)
            fail("pv_depth", "P V over the whole tile is modelled for the online softmax without the diagonal fix");
        if (p.p_quant != nullptr && block_n >= 0 && block_n % 32 != 0)
            fail("p_quant", "P's blocks of 32 keys must tile block_n (a multiple of 32)");
        if (p.p_quant != nullptr && r_.output.epilogue != Epilogue::fa2)
            fail("p_quant", "P is block-quantized under FlashAttention-2's epilogue only");
    }

    void output() const {
        const Epilogue e = r_.output.epilogue;
        const bool torch_kernel = e == Epilogue::torch_flash || e == Epilogue::cudnn || e == Epilogue::mem_eff;
        if (torch_kernel && (r_.p_and_v.p_scale != 1.0f || !(*r_.output.accumulator == f32)))
            fail("epilogue",
                 "PyTorch's flash, cuDNN's and the memory-efficient epilogues have P unscaled (p_scale 1) and O "
                 "accumulated in f32");
        if (r_.output.epilogue == Epilogue::fa3 && (r_.p_and_v.p_scale != 1.0f || !(*r_.output.accumulator == f32)))
            fail("epilogue",
                 "FlashAttention-3's epilogue has P scaled only by its max offset (p_scale 1) and O accumulated "
                 "in f32");
        if (r_.softmax.max_offset != 0 && torch_kernel)
            fail("max_offset",
                 "PyTorch's flash, cuDNN's and the memory-efficient epilogues have no max offset (FlashAttention-3's "
                 "has: epilogue=fa3)");
    }

    void backward() const {
        const BackwardStage& b = r_.backward;
        const bool online = r_.softmax.kind == SoftmaxKind::online;
        if (b.schedule != GradSchedule::in_order && !online)
            fail("grad_schedule",
                 "PyTorch's flash and memory-efficient backward schedules run the online softmax only");
        if (b.schedule != GradSchedule::in_order && b.quant != nullptr)
            fail("grad_schedule",
                 "PyTorch's flash and memory-efficient backwards do not block-quantize their operands (grad_quant "
                 "none)");
        if (r_.backward.quant != nullptr &&
            (r_.tiles.block_m % 32 != 0 || (r_.tiles.block_n >= 0 && r_.tiles.block_n % 32 != 0)))
            fail("grad_quant", "the gradient operands' blocks of 32 must tile block_m and block_n (multiples of 32)");
    }

private:
    [[noreturn]] void fail(std::string_view key, const std::string& why) const {
        roundscope::emu::fail(r_.name, key, why);
    }

    const AttentionRecipe& r_;
};

}  // namespace

void validate(const AttentionRecipe& r) {
    const CrossRules across(r);
    across.target();
    r.tiles.validate(r.name);
    r.softmax.validate(r.name);
    across.softmax();
    r.p_and_v.validate(r.name);
    across.p_and_v();
    across.output();
    r.backward.validate(r.name);
    across.backward();
}

int resolved_block_n(const AttentionRecipe& r, std::uint64_t d) {
    if (r.tiles.block_n == block_n_fa3_fp8)
        return d <= 64 ? 160 : d <= 96 ? 128 : d <= 128 ? 224 : d <= 192 ? 160 : 128;
    if (r.tiles.block_n > 0) return r.tiles.block_n;
    const bool mem_eff = r.tiles.block_n == block_n_mem_eff;
    if (d > 128)
        throw Error(fmt::format("recipe '{}': block_n={} follows PyTorch's {} tiles for D <= 128 only (D is {})",
                                r.name, mem_eff ? "mem-eff" : "auto", mem_eff ? "memory-efficient" : "flash", d));
    if (mem_eff) return d <= 64 ? 64 : 128;
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

int flash_head_dim(const AttentionRecipe& r, std::uint64_t d) {
    if (d > 256)
        throw Error(
            fmt::format("recipe '{}': FlashAttention-2's kernels run head dimensions up to 256 (D is {})", r.name, d));
    return static_cast<int>((d + 31) / 32 * 32);
}

BackwardTiles torch_flash_backward_tiles(const AttentionRecipe& r, std::uint64_t d) {
    const int head_dim = flash_head_dim(r, d);
    if (head_dim <= 64) return {128, 128};
    if (head_dim <= 128) return {64, 128};
    return {64, 64};
}

std::string cudnn_backward_note(const AttentionRecipe& r, std::uint64_t n_q, std::uint64_t n_kv) {
    if (r.backward.schedule != GradSchedule::cudnn || (n_q <= 128 && n_kv <= 128)) return "";
    return fmt::format(
        "dq, dk, dv: cuDNN's backward was captured at 128 queries and 128 keys (two blocks of 64 each: dK and dV "
        "summed over the row blocks in order, dQ chained over the key blocks); at {} queries and {} keys the recipe "
        "keeps those orders, which no GPU run has tested",
        n_q, n_kv);
}

std::string dq_order_note(const AttentionRecipe& r, std::uint64_t n_kv, std::uint64_t d) {
    if (r.backward.schedule != GradSchedule::torch_flash) return "";
    const auto block_n = static_cast<std::uint64_t>(torch_flash_backward_tiles(r, d).block_n);
    if (n_kv <= block_n) return "";
    return fmt::format(
        "dq: PyTorch's flash backward adds the dQ of each of the {} key blocks ({} keys each) with atomicAdd, in an "
        "order the GPU does not fix; the recipe adds them in key order, one of the results the GPU can give",
        (n_kv + block_n - 1) / block_n, block_n);
}

}  // namespace roundscope::emu
