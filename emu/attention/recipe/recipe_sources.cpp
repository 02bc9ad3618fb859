#include "emu/attention/recipe/recipe_sources.hpp"

#include <utility>

namespace roundscope::emu {

std::string_view recipe_source(std::string_view name) {
    static constexpr std::pair<std::string_view, std::string_view> sources[] = {
        {"fa2-bf16", "FlashAttention-2 (Dao, arXiv:2307.08691); checked against roundscope's CUDA twins on an H100"},
        {"fa2-bf16-max-adjust", "FlashAttention-2 with Qiu & Yao's max adjustment (arXiv:2510.04212, attention.py)"},
        {"fa2-bf16-o-bf16", "FlashAttention-2's tiles with a BF16 running O (a kernel with a BF16 O accumulator)"},
        {"fa2-bf16-torch",
         "Qiu & Yao's released attention.py (github.com/ucker/why-low-precision-training-fails) on BF16 tensors"},
        {"fa2-bf16-torch-compiled",
         "the same code under torch.compile on an AVX-512 CPU (Inductor, SLEEF); checked against torch itself"},
        {"fa2-f16", "FlashAttention-2's tiles for an FP16 model; the sm_90 mma.sync FP16 model"},
        {"fa2-f32",
         "FlashAttention-2's tiles for a float32 model; exact products rounded once (not a particular GEMM)"},
        {"fa3-bf16", "FlashAttention-3 (Shah et al., arXiv:2407.08608): KV blocks in reverse"},
        {"h100-bf16", "roundscope's Hopper kernel (gpu/kernels/hopper_flash.cu); the simulated GPU"},
        {"fa3-fp8", "FlashAttention-3's FP8 set-up with P scaled by 2^8 after exp2 (arXiv:2407.08608)"},
        {"h100-fp8",
         "FlashAttention-3's FP8 forward as its source reads (Dao-AILab/flash-attention hopper/); not checked on a "
         "GPU"},
        {"fp8-forward-order", "fa3-fp8 with the KV blocks in forward order (the P-collapse control)"},
        {"fp8-p-cast-only", "arXiv:2606.06521's kernel-faithful set-up: only the cast of P to E4M3 rounds"},
        {"mxfp4-v", "V block-quantized to MXFP4 along tokens (OCP MX v1.0; future leakage)"},
        {"mxfp4-v-fixed", "mxfp4-v with the diagonal tile of P multiplying unquantized V"},
        {"naive-f32", "a non-fused float32 softmax (S, exp, sum, division)"},
        {"naive-bf16", "a BF16 model's separate float32 softmax kernel, then a BF16 matmul"},
        {"naive-f16", "a non-fused FP16 softmax in an FP16 model"},
        {"torch-flash-sm90",
         "PyTorch's flash SDPA on sm_90: the torch wheel's SASS and FlashAttention-2's source; bit-exact on every H100 "
         "capture, forward (split or not) and backward (docs/gpu.md)"},
        {"torch-cudnn-sm90",
         "cuDNN's SDPA as PyTorch calls it on an H100, forward and (at D 64) backward, found on the captures; "
         "bit-exact on every one"},
        {"torch-efficient-sm90",
         "PyTorch's memory-efficient SDPA (mem_eff_attention source, the wheel's SASS: HMMA.1688); bit-exact on every "
         "H100 capture, forward and backward (docs/gpu.md)"},
        {"torch-math-sm90",
         "PyTorch's math SDPA on a GPU (attention.cpp's composition, the captures' kernels: cuBLAS's FFMA SGEMM, "
         "ATen's softmax_warp_forward, libdevice's expf); bit-exact on every H100 capture; forward only (docs/gpu.md)"},
        {"torch-cpu-bf16",
         "PyTorch's CPU SDPA on BF16 tensors with AVX-512 and AMX-BF16 (ATen's cpu_flash_attention, oneDNN's AMX "
         "GEMM); bit-exact with torch on such a CPU; with the avx512-bf16 products, on an Intel CPU with "
         "AVX512-BF16 and no AMX, forward and backward; with the mkl-avx2 products, on an AMD CPU with AVX-512, "
         "forward and backward where MKL's GEMMs are at least 24 x 4 (docs/torch-cpu.md)"},
        {"torch-cpu-math",
         "PyTorch's math SDPA on a CPU, which F.scaled_dot_product_attention runs where V's head dimension is not "
         "Q's (attention.cpp's composition in float32, MKL's batched SGEMM, ATen's vectorized softmax); bit-exact "
         "with torch on an AMD CPU with AVX-512 (mkl-avx2) on BF16, FP16 and float32, forward and backward "
         "(docs/torch-cpu.md)"},
    };
    for (const auto& [preset, source] : sources)
        if (preset == name) return source;
    return {};
}

}  // namespace roundscope::emu
