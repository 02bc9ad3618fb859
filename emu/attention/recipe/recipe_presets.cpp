// The named recipes: the kernels each is named after, and the papers' set-ups.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "emu/attention/recipe/attention_recipe.hpp"
#include "lib/error.hpp"
#include "lib/suggest.hpp"

namespace roundscope::emu {
namespace {

AttentionRecipe fa2_bf16() {
    AttentionRecipe r;
    r.name = "fa2-bf16";
    return r;
}

// FlashAttention-2's tiles for a model held in FP16: every operand, P, O and the gradients in
// FP16, the products on the sm_90 mma.sync FP16 model.
AttentionRecipe fa2_f16() {
    AttentionRecipe r;
    r.name = "fa2-f16";
    r.target.input = r.p_and_v.p_format = r.output.format = r.backward.grad_format = r.backward.ds_format = &f16;
    return r;
}

// FlashAttention-2's tiles for a model held in float32 (PyTorch's CPU flash kernel, a float32
// Triton kernel): every operand, P, O and the gradients in float32; each product element's exact
// sum rounded once to float32 (product=f64), a model of a float32 GEMM, not of a particular one.
AttentionRecipe fa2_f32() {
    AttentionRecipe r;
    r.name = "fa2-f32";
    r.target.input = r.p_and_v.p_format = r.output.format = r.backward.grad_format = r.backward.ds_format = &f32;
    r.scores.product = r.p_and_v.product = r.backward.product = Product::exact_f64;
    return r;
}

AttentionRecipe fa3_bf16() {
    AttentionRecipe r;
    r.name = "fa3-bf16";
    r.tiles.block_n = 128;
    r.tiles.kv_order = KvOrder::reverse;
    return r;
}

// roundscope's FlashAttention-3-style BF16 forward for the H100 (the arithmetic its kernel is
// written to; on the simulated GPU until wgmma runs there): S and P V by wgmma m64nNk16 (the
// sm_90 wgmma model), two consumer warpgroups of 64 rows (block_m 128) over 128-key tiles in
// reverse; c = RN(scale log2 e) in double; P-bar = exp2 of one fma, fma(s, c, -m), by the
// FMA-only software exp2; the rescale from the raw maxima, exp2(RN(RN(m_old - m) c)); each row's
// sum in its four lanes' fragments (the wgmma accumulator holds a row's columns 2 (t % 4) and
// 2 (t % 4) + 1 of every 8 as mma.sync's does), quad-reduced at the end; P and O cast RNE; P V
// over every k16 step of a tile, a partial one's too (the kernel's fixed loop).
AttentionRecipe h100_bf16() {
    AttentionRecipe r = fa3_bf16();
    r.name = "h100-bf16";
    r.target.instruction = "wgmma";
    r.scores.scale_log2 = ScaleLog2::float64;
    r.softmax.exp2_arg = Exp2Arg::fma;
    r.softmax.rescale_arg = RescaleArg::raw;
    r.softmax.row_sum = RowSum::quad_ffma;
    r.p_and_v.depth = PvDepth::tile;
    return r;
}

AttentionRecipe fa3_fp8() {
    AttentionRecipe r = fa3_bf16();
    r.name = "fa3-fp8";
    r.target.input = &e4m3;
    r.target.instruction = "wgmma";
    r.p_and_v.p_format = &e4m3;
    r.p_and_v.p_scale = 256;  // FlashAttention-3's max offset of 8
    return r;
}

// FlashAttention-3's FP8 forward on sm_90 as its source reads (Dao-AILab/flash-attention hopper/:
// softmax.h, flash_fwd_kernel_sm90.h, tile_size.h; built with --use_fast_math by its setup.py):
// Q, K, V and P in E4M3 (descale factors 1), S and P V by wgmma; 128-row tiles over FA3's FP8 KV
// tile for D (160 at D <= 64, 224 at D <= 128), in reverse; c = RN(scale log2 e) in double; the
// max offset of 8 inside exp2's argument, P-bar = ex2.approx.ftz(fma(s, c, -fma(m, c, -8))), so
// P-bar lies in [0, 256] before its satfinite E4M3 cast; alpha = ex2.approx.ftz(RN(RN(m_old - m)
// c)) from the raw maxima; each lane sums its keys of the tile, then fma(l_t, alpha, that); O =
// RN(acc rcp.approx.ftz(l)) in BF16, LSE from l 2^-8 (Epilogue::fa3). Forward only. The fused
// forms where the source leaves a multiply and an add apart follow nvcc's contraction as PyTorch's
// FlashAttention-2 binary shows it; FA3's own binary was not available to check (docs/findings.md).
AttentionRecipe h100_fp8() {
    AttentionRecipe r = h100_bf16();  // wgmma, reverse order, c in double, the fma argument, raw rescale
    r.name = "h100-fp8";
    r.target.input = r.p_and_v.p_format = &e4m3;
    r.tiles.block_n = block_n_fa3_fp8;
    r.softmax.exp2 = Exp2Kind::hardware_ftz;
    r.softmax.row_sum = RowSum::lane_tile;
    r.softmax.max_offset = 8;
    r.output.epilogue = Epilogue::fa3;
    return r;
}

AttentionRecipe fp8_forward_order() {
    AttentionRecipe r = fa3_fp8();
    r.name = "fp8-forward-order";
    r.tiles.kv_order = KvOrder::forward;
    r.p_and_v.p_scale = 1;
    return r;
}

// The setup of arXiv:2606.06521's kernel-faithful experiments: Q, K and V in float32, so that
// only the cast of P to E4M3 rounds (products exact, rounded once to float32, O kept in
// float32), forward order and S = 1 as the baseline its fixes are measured against.
AttentionRecipe fp8_p_cast_only() {
    AttentionRecipe r = fp8_forward_order();
    r.name = "fp8-p-cast-only";
    r.target.input = &f32;
    r.scores.product = r.p_and_v.product = Product::exact_f64;
    r.output.format = &f32;
    return r;
}

AttentionRecipe mxfp4_v(bool fixed) {
    AttentionRecipe r;
    r.name = fixed ? "mxfp4-v-fixed" : "mxfp4-v";
    r.p_and_v.v_quant = &mxfp4;
    r.p_and_v.diagonal_fix = fixed;
    return r;
}

// The non-fused softmax of a model held in `model`: its inputs, P and O in that format, the
// softmax in `softmax` (naive-f32 and naive-f16: the model's own; naive-bf16: a BF16 model's
// separate float32 softmax kernel followed by a BF16 matmul). A float32 model's matmuls are
// exact products summed and rounded once to float32 (product=f64), a model of a float32 GEMM.
AttentionRecipe naive(const Format& model, const Format& softmax) {
    AttentionRecipe r;
    r.name = std::string("naive-") + std::string(model.name);
    r.softmax.kind = SoftmaxKind::naive;
    r.softmax.format = &softmax;
    r.target.input = r.p_and_v.p_format = r.output.format = &model;
    if (model == f32) r.scores.product = r.p_and_v.product = Product::exact_f64;
    return r;
}

// FlashAttention-2 with Qiu & Yao's fix (arXiv:2510.04212): no P-bar entry exactly 1.
AttentionRecipe fa2_bf16_fixed() {
    AttentionRecipe r = fa2_bf16();
    r.name = "fa2-bf16-max-adjust";
    r.softmax.max_adjust = true;
    return r;
}

// FlashAttention-2's tiles with the running O in BF16 (a kernel with a BF16 accumulator for
// O): each tile's P-bar V and the rescaled O rounded to BF16, 64 keys at a time.
AttentionRecipe fa2_bf16_o_bf16() {
    AttentionRecipe r = fa2_bf16();
    r.name = "fa2-bf16-o-bf16";
    r.output.accumulator = &bf16;
    return r;
}

// The paper's released implementation (github.com/ucker/why-low-precision-training-fails,
// attention.py, with the 512 x 512 buckets of its model.py, under train.py's BF16 autocast):
// FlashAttention-2 written in PyTorch on BF16 tensors, so S, the row max and sum, each block's
// P-bar V and the running O are rounded to BF16 (torch_softmax.hpp). Its backward forms delta =
// (dO * O).sum() in float32 from exact products: an eager backward cannot run under autocast
// (a custom Function's backward runs without it, and einsum of its float32 p with the BF16 dO
// raises), so the run is train.py's default compile = True, whose backward AOTAutograd traces
// under the forward's autocast (torch._functorch.config.backward_pass_autocast =
// "same_as_forward", the default up to PyTorch 2.15 at least), where sum autocasts to float32
// and Inductor keeps the BF16 product in float32 (docs/findings.md says how this was checked).
AttentionRecipe fa2_bf16_torch() {
    AttentionRecipe r = fa2_bf16();
    r.name = "fa2-bf16-torch";
    r.tiles.block_m = r.tiles.block_n = 512;
    r.softmax.kind = SoftmaxKind::online_torch;
    r.softmax.format = &bf16;
    r.output.accumulator = &bf16;
    r.backward.delta_format = &f32;
    return r;
}

// fa2-bf16-torch as train.py runs it, under torch.compile (compiled_torch_softmax.hpp): Inductor
// on an AVX-512 CPU (cpu_vector=avx2: its AVX2 code) keeps S scale, the exp argument, the row sum
// and O in float32, with SLEEF's exp and log, and sums delta in its 32 lanes; buckets of 512, as
// the forward above, up to five of them. Its backward is the released code's
// (compiled_torch_softmax.hpp), which only ever ran compiled.
AttentionRecipe fa2_bf16_torch_compiled() {
    AttentionRecipe r = fa2_bf16_torch();
    r.name = "fa2-bf16-torch-compiled";
    r.softmax.kind = SoftmaxKind::compiled_torch;
    r.backward.delta_sum = DeltaSum::lanes32;
    return r;
}

// PyTorch's flash forward on sm_90 (FlashAttention-2 built with UNFUSE_FMA and without fast math;
// its op order read from the SASS torch 2.15 ships, docs/gpu.md): KV blocks in reverse; c =
// RN(scale log2 e) in double; p = exp2f(RN(RN(s c) - RN(m c))); alpha = exp2f(RN(RN(m_old - m) c));
// four lanes' partial row sums with a fused multiply-add; O = acc RN(1/l); LSE = fma(m, scale,
// logf(l)), exp2f and logf on an H100's MUFU. Shapes PyTorch splits across KV on an H100 SXM (132
// SMs) run its split kernel and combine (flash_split_kv.hpp). Bit-exact with PyTorch's flash
// forward on an H100 in every captured case, split or not (docs/gpu.md).
AttentionRecipe torch_flash_sm90() {
    AttentionRecipe r;
    r.name = "torch-flash-sm90";
    r.tiles.block_n = 0;  // auto: 128 x 128 at D <= 64, 128 x 64 at D <= 128
    r.tiles.kv_order = KvOrder::reverse;
    r.softmax.exp2 = Exp2Kind::cuda_exp2f;
    r.scores.scale_log2 = ScaleLog2::float64;
    r.softmax.rescale_arg = RescaleArg::raw;
    r.softmax.row_sum = RowSum::quad_ffma;
    r.output.epilogue = Epilogue::torch_flash;
    r.tiles.split_kv_sms = 132;
    // its backward: FlashAttention-2's seqk-parallel kernel (flash_bwd_kernel.h,
    // flash_bwd_preprocess_kernel.h): delta by dot_do_o's threads, PyTorch's backward tiles for
    // an H100, dQ summed in a float32 buffer; P against RN(LSE RN(log2 e)), the epilogue's
    // lse_log2
    r.backward.delta_sum = DeltaSum::fa2_threads;
    r.backward.schedule = GradSchedule::torch_flash;
    return r;
}

// cuDNN's SDPA on sm_90 as PyTorch calls it (the engine `..._sdpa_sm90_flash_fprop_wgmma_f16_knob_7`,
// tiles 64 x 128), found on the H100 captures (docs/gpu.md): PyTorch's flash arithmetic but the
// 128-key tiles in forward order, the rescale from the scaled maxima, FlashAttention-3's lanes
// of the row sum joined (l_0 + l_1) + (l_2 + l_3), the LSE from the scaled max, and exp2 as
// MUFU.EX2 with ftz (which the backward's P shows). Its backward (`..._flash_bprop_wgmma_f16_knob_26`,
// at D 64): delta by `compute_dot_do_o` in FlashAttention-2's threads, grad_schedule=cudnn.
AttentionRecipe torch_cudnn_sm90() {
    AttentionRecipe r = torch_flash_sm90();
    r.name = "torch-cudnn-sm90";
    r.tiles.block_n = 128;
    r.tiles.kv_order = KvOrder::forward;
    r.tiles.split_kv_sms = 0;
    r.softmax.rescale_arg = RescaleArg::scaled;
    r.softmax.row_sum = RowSum::cudnn;
    r.output.epilogue = Epilogue::cudnn;
    r.softmax.exp2 = Exp2Kind::hardware_ftz;
    r.backward = BackwardStage{};
    r.backward.delta_sum = DeltaSum::fa2_threads;
    r.backward.schedule = GradSchedule::cudnn;
    return r;
}

// PyTorch's memory-efficient SDPA on sm_90 (fmha_cutlassF_bf16_aligned_64x64_rf_sm80 and 64x128_rf:
// xformers' CUTLASS kernel, built with bias support, read from kernel_forward.h and checked on the
// H100 captures, docs/gpu.md): every product by mma.sync m16n8k8 (the torch wheel's SASS: HMMA.1688,
// 8 products a step); 64 or 128 keys a tile in order; S times the float32 scale, rounded,
// then times RN(log2 e); p = exp2f(RN(t - m)); alpha = exp2f(RN(m_old - m)) from the scaled maxima;
// each warp's 32 keys summed over four lanes, the warps' sums added to RN(l alpha) in order; O =
// acc RN(1/l); LSE = RN(m / RN(log2 e)) + logf(l) with libdevice's logf. P V runs every k-step of a
// partial tile. Its backward (fmha_cutlassB_*_64x64_k64, kernel_backward.h; D <= 64): delta by
// computeDelta's two threads a row, P = expf(RN(s scale) - LSE) stored in BF16, dS = RN(RN(RN(dP -
// delta) P) scale), the split keys' block orders (mem_eff_backward.hpp).
AttentionRecipe torch_efficient_sm90() {
    AttentionRecipe r;
    r.name = "torch-efficient-sm90";
    r.target.instruction = "mma.sync.m16n8k8";  // HMMA.1688 (CUTLASS's SM80 BF16 and FP16 instruction shape)
    r.tiles.block_n = block_n_mem_eff;
    r.scores.scale_log2 = ScaleLog2::scale_first;
    r.softmax.exp2 = Exp2Kind::cuda_exp2f;
    r.softmax.row_sum = RowSum::mem_eff;
    r.p_and_v.depth = PvDepth::tile;
    r.output.epilogue = Epilogue::mem_eff;
    r.backward.delta_sum = DeltaSum::mem_eff_threads;
    r.backward.schedule = GradSchedule::mem_eff;
    return r;
}

// F.scaled_dot_product_attention on BF16 tensors on a CPU with AVX-512 and AMX-BF16 (FP16 and float32
// on an AMD CPU with the mkl-avx2 products), as torch
// 2.15 runs it there (ATen's cpu_flash_attention): KV blocks of 512 keys in order, S and P V by
// oneDNN's AMX GEMM (amx_gemm.hpp), natural exp by fexp_u20 and C's exp, l in the kernel's vector
// order, O = acc RN(1/l), LSE = m + logf(l) (aten_cpu_softmax.hpp). Found by hypothesis and
// test against torch itself, bit-exact on every shape tests/peer/test_aten_cpu_torch.py runs.
// Forward only.
AttentionRecipe torch_cpu_bf16() {
    AttentionRecipe r;
    r.name = "torch-cpu-bf16";
    r.tiles.block_n = 512;
    r.scores.product = r.p_and_v.product = Product::amx;
    r.softmax.kind = SoftmaxKind::aten_cpu;
    return r;
}

// F.scaled_dot_product_attention's math path on an H100 (SDPBackend.MATH; what PyTorch runs where
// no fused kernel takes the call), as torch 2.11 composes it for CUDA tensors: float32 throughout,
// q and k each times RN(sqrt(scale)), cuBLAS's FFMA SGEMMs (TF32 off, PyTorch's default),
// softmax_warp_forward with libdevice's expf (cuda_math_forward.hpp); O cast once. Found on the
// H100 captures, bit-exact on each. Forward only, rows of up to 1024 keys.
AttentionRecipe torch_math_sm90() {
    AttentionRecipe r;
    r.name = "torch-math-sm90";
    r.softmax.kind = SoftmaxKind::cuda_math;
    r.scores.product = r.p_and_v.product = Product::ffma;
    r.p_and_v.p_format = &f32;
    return r;
}

// F.scaled_dot_product_attention's math path on a CPU (where its flash kernel does not take the
// call: V's head dimension other than Q's, or dropout), as torch 2.15 composes it: float32
// throughout, q and k each times RN(sqrt(scale)), MKL's batched SGEMM (its AVX2 kernel on an AMD
// CPU: mkl-avx2), ATen's vectorized softmax (aten_cpu_math_forward.hpp); O cast once. Found on an
// AMD EPYC (Zen 4), bit-exact on BF16, FP16 and float32, forward and backward (autograd through
// the same ops: aten_cpu_math_backward.hpp).
AttentionRecipe torch_cpu_math() {
    AttentionRecipe r;
    r.name = "torch-cpu-math";
    r.softmax.kind = SoftmaxKind::aten_cpu_math;
    r.scores.product = r.p_and_v.product = Product::mkl_avx2;
    r.p_and_v.p_format = &f32;
    r.backward.ds_format = &f32;  // autograd's dS stays in float32
    return r;
}

const std::vector<AttentionRecipe>& presets() {
    static const std::vector<AttentionRecipe> all{fa2_bf16(),
                                                  fa2_bf16_fixed(),
                                                  fa2_bf16_o_bf16(),
                                                  fa2_bf16_torch(),
                                                  fa2_bf16_torch_compiled(),
                                                  fa2_f16(),
                                                  fa2_f32(),
                                                  fa3_bf16(),
                                                  h100_bf16(),
                                                  fa3_fp8(),
                                                  h100_fp8(),
                                                  fp8_forward_order(),
                                                  fp8_p_cast_only(),
                                                  mxfp4_v(false),
                                                  mxfp4_v(true),
                                                  naive(f32, f32),
                                                  naive(bf16, f32),
                                                  naive(f16, f16),
                                                  torch_flash_sm90(),
                                                  torch_cudnn_sm90(),
                                                  torch_efficient_sm90(),
                                                  torch_math_sm90(),
                                                  torch_cpu_bf16(),
                                                  torch_cpu_math()};
    return all;
}

}  // namespace

std::span<const AttentionRecipe> recipe_presets() { return presets(); }

AttentionRecipe find_recipe(std::string_view name) {
    std::string names;
    std::vector<std::string> known;
    for (const AttentionRecipe& r : presets()) {
        if (r.name == name) return r;
        names += (names.empty() ? "" : ", ") + r.name;
        known.push_back(r.name);
    }
    throw Error(fmt::format("unknown recipe '{}'{} (presets: {})", printable(name), did_you_mean(name, known), names));
}

}  // namespace roundscope::emu
