#pragma once
// A recipe names every precision choice of a flash-attention kernel, forward and backward, so
// that the emulator (flash_attention.hpp) and a CUDA kernel that take the same recipe round
// in the same places. Plain data: printable as KEY=VALUE settings, parsed back from them,
// recorded in every output file's metadata.
//
// Presets (recipe_presets.cpp; the settings: recipe_settings.cpp) follow the kernels they are named after:
// FlashAttention-2 (Dao, arXiv:2307.08691) keeps S, the running O, m and l in float32 and
// casts P to the input type before P V; FlashAttention-3 (Shah et al., arXiv:2407.08608)
// walks the KV blocks in reverse and, in FP8, computes P = exp2(s - max + 8), i.e. P scaled by
// S = 2^8 before the E4M3 cast (its max offset of 8).
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "emu/attention/math/softmax_choices.hpp"
#include "emu/block/block_format.hpp"
#include "emu/numbers/format.hpp"

namespace roundscope::emu {

enum class SoftmaxKind : std::uint8_t {
    online,           // running max, rescale by exp2 of the max difference, final division
    naive,            // S, then exp(S - rowmax), row sum and division, in softmax_format
    naive_unshifted,  // the same without subtracting the row max (overflows first)
    online_torch,     // online, as a flash attention in PyTorch tensor ops under autocast runs
                      // it: S, the row max and sum stored in softmax_format, natural exp in
                      // float32 (torch_softmax.hpp); the emulator's only
    compiled_torch,   // the same code under torch.compile on a CPU (AVX-512 or AVX2): intermediates
                      // in float32, SLEEF's exp and log (compiled_torch_softmax.hpp)
    aten_cpu,         // ATen's CPU flash attention (F.scaled_dot_product_attention on a CPU with
                      // AVX-512): natural exp by fexp_u20 and expf, its vector row sum, O times
                      // RN(1/l), LSE m + logf(l) (aten_cpu_softmax.hpp); BF16 inputs
    cuda_math,        // PyTorch's math SDPA on a GPU (attention.cpp's _scaled_dot_product_attention_math):
                      // q, k and v upcast to float32, q and k each times RN(sqrt(scale)), S and P V
                      // by cuBLAS's float32 GEMMs, ATen's softmax_warp_forward (32 lanes, libdevice's
                      // expf, the lanes' sums joined by a butterfly, one division), O cast once
                      // (cuda_math_forward.hpp)
    aten_cpu_math,    // PyTorch's math SDPA on a CPU (the same composition): MKL's float32 GEMMs,
                      // ATen's _vec_softmax_lastdim (SLEEF's expf, 16 lanes, P = e RN(1/l)), O cast
                      // once (aten_cpu_math_forward.hpp)
};

enum class KvOrder : std::uint8_t { forward, reverse };

/// The constant c = scale log2(e) the scores are multiplied by before exp2.
// The values are not named f32 and f64, which are the formats (emu::f32): the recipe key
// scale_log2 spells them so.
enum class ScaleLog2 : std::uint8_t {
    float32,      // RN(scale x RN(log2 e)), a float32 product
    float64,      // RN(scale x log2 e), the product in double (PyTorch's flash: params.scale_softmax_log2)
    scale_first,  // S scaled first, RN(s scale), then times RN(log2 e): PyTorch's memory-efficient kernel
                  // (kernel_forward.h, built with bias support: `accum = scale * accum`, then
                  // iterative_softmax's `scaling * kLog2e` with scaling 1)
};

/// How a row ends: O, its LSE and an empty row.
enum class Epilogue : std::uint8_t {
    fa2,          // O = acc RN(1 / (l S)); LSE = (m' + log2 l) ln 2 with soft_log2; -inf when empty
    torch_flash,  // PyTorch's flash (normalize_softmax_lse): O = acc RN(1 / l), 1/l taken as 1
                  // when l is 0 or NaN; LSE = fma(m, scale, logf(l)) with the raw max m and the
                  // proxy logf; +inf when empty
    fa3,          // FlashAttention-3's (hopper/softmax.h finalize, under --use_fast_math): O =
                  // RN(acc rcp.approx.ftz(l)), O = 0 when l is 0 or NaN; LSE = fma(m, RN(c RN(ln 2)),
                  // RN(lg2.approx.ftz(l 2^-k) RN(ln 2))) with the raw max m, c = scale log2 e and k the
                  // max offset; -inf when empty
    cudnn,        // cuDNN's SDPA on sm_90 (measured on its captures): O as fa3's (MUFU.RCP);
                  // LSE = fma(RN(m c), RN(ln 2), RN(lg2.approx.ftz(l) RN(ln 2))) from the scaled max
                  // m c; an empty row (never captured) as fa3's
    mem_eff,      // PyTorch's memory-efficient kernel (kernel_forward.h, epilogue_rescale_output.h): O =
                  // acc RN(1 / l), 1/l taken as 1 when l is 0; LSE = RN(RN(m / RN(log2 e)) + logf(l))
                  // from the scaled max m, logf libdevice's (cutlass::fast_log without fast math)
};

/// "forward" or "reverse": the one spelling of KV orders (recipes, the CLI, JSON).
std::string_view kv_order_name(KvOrder order);
/// The order named `text`; Error "WHAT: 'text' is not one of forward|reverse" otherwise.
KvOrder parse_kv_order(std::string_view text, const std::string& what);

/// How a product is computed: by the recipe's tensor-core model, in float64 (exact products, a
/// double sum, one rounding to float32: the "exact" stage of the attribution), as oneDNN's
/// BF16 GEMM on a CPU with AMX-BF16 runs it for ATen (amx_gemm.hpp) or on AVX512-BF16, as MKL's
/// on an AMD CPU (mkl_avx2_gemm.hpp), or as a float32 FFMA chain over k in order from +0 (cuBLAS's
/// SIMT SGEMM with TF32 off, which PyTorch's math path calls).
// the key spells exact_f64 "f64", avx512_bf16 "avx512-bf16" and mkl_avx2 "mkl-avx2"
enum class Product : std::uint8_t { model, exact_f64, amx, ffma, avx512_bf16, mkl_avx2 };

/// Whether `p` is the CPU's BF16 GEMM as ATen's CPU kernel runs it (AMX, AVX512-BF16, MKL's AVX2).
constexpr bool cpu_bf16_gemm(Product p) {
    return p == Product::amx || p == Product::avx512_bf16 || p == Product::mkl_avx2;
}

/// How far P V's chain of k-steps runs over a tile that holds fewer keys than block_n (a head's
/// last tile): over the keys (ceil(keys / k) steps, the last zero-padded), or over the whole
/// tile (a kernel's fixed loop: the steps past the keys add zero products, which turn a -0
/// accumulator into +0).
enum class PvDepth : std::uint8_t { keys, tile };

/// How the backward pass forms delta = rowsum(dO * O).
enum class DeltaKind : std::uint8_t {
    stored_o,  // O as the forward pass stored it (o_format), as FlashAttention-2 does
    f32_o,     // O in float32, before its cast
    p_dp,      // rowsum(P * dP) from the backward pass's own P and dP
};

/// The order of delta's float32 sum over the head dimension.
// How a soft cap's tanh is rounded (softcap.hpp): correctly, to float32. FlashAttention's
// cutlass::fast_tanh is the GPU's tanh.approx.f32, which no capture has modelled yet.
enum class SoftcapTanh : std::uint8_t { exact };

enum class DeltaSum : std::uint8_t {
    sequential,       // c = 0, 1, ...
    lanes16,          // Inductor's AVX-512 reduction over 16 float lanes, then their tree (one vector: 8
                      // lanes under cpu_vector=avx2)
    lanes32,          // the same over 32 lanes (a loop that loads BF16) folded to 16 (inductor_cpu_math.hpp;
                      // two vectors: 16 lanes folded to 8 under cpu_vector=avx2)
    fa2_threads,      // FlashAttention-2's dot_do_o: a row over 8 (or 4) threads, each a chain over its
                      // 8 consecutive features of every 64- (or 32-) feature page, then a butterfly
    mem_eff_threads,  // the memory-efficient backward's computeDelta: a row over 2 threads (4 at D > 64),
                      // each an FFMA chain from 0 over its 8 consecutive features of every 16- (32-)
                      // feature page, then their shuffles with offset 1 (then 2)
};

/// How the backward pass visits its tiles and sums dQ.
enum class GradSchedule : std::uint8_t {
    in_order,     // dK, dV over the row blocks in order; dQ over the key blocks in order, in registers
    torch_flash,  // PyTorch's flash backward on an H100 (flash_context.hpp: TorchFlashBackwardTiles)
    mem_eff,      // PyTorch's memory-efficient backward (mem_eff_backward.hpp): its split-key blocks'
                  // orders, P from the natural LSE by expf, dS with the scale, dQ chained over key blocks
    cudnn,        // cuDNN's flash backward on sm_90 (flash_bprop knob 26, captured at D 64): 64 x 64
                  // tiles, dK and dV over the row blocks in order, dQ chained over the key blocks in
                  // order; P = exp2(RN(RN(RN(s scale) - LSE) log2 e)) from the natural LSE
};

// The recipe, stage by stage in the order a kernel runs them (the stages of recipe_key_table).
// Each stage checks its own keys (validate, naming the recipe); the rules that join stages are
// AttentionRecipe's (validate below).

/// What runs the products: the input format and the tensor-core model.
/// The vector registers PyTorch's CPU code ran with: its reductions' lanes follow them.
enum class CpuVector : std::uint8_t {
    avx512,  // 16 float lanes (torch.backends.cpu.get_cpu_capability() "AVX512")
    avx2,    // 8 float lanes ("AVX2"; under compiled-torch only: ATen's AVX2 kernel is not modelled)
};

/// Float lanes of one vector register.
constexpr int cpu_vector_lanes(CpuVector v) { return v == CpuVector::avx2 ? 8 : 16; }

struct TargetStage {
    const Format* input = &bf16;  // q, k, v and dO are rounded to it (RNE) first
    std::string arch = "sm90";    // the tensor-core model of every product (mma_model.hpp)
    std::string instruction = "mma.sync";
    CpuVector cpu_vector = CpuVector::avx512;  // the CPU code's vectors (compiled-torch, aten-cpu)
};

/// block_n's value "fa3-fp8": the KV tile FlashAttention-3's FP8 forward takes for the head dimension
/// (hopper/tile_size.h, tile_size_fwd_sm90 with one-byte elements: D <= 64: 160, <= 96: 128,
/// <= 128: 224, <= 192: 160, else 128).
inline constexpr int block_n_fa3_fp8 = -1;

/// block_n's value "mem-eff": the KV tile of PyTorch's memory-efficient forward for the head
/// dimension (cutlassF: fmha_cutlassF_*_64x64_rf at D <= 64, 64x128_rf at D <= 128; the 32x128_gmem
/// kernel above, whose O passes through global memory, is not modelled).
inline constexpr int block_n_mem_eff = -2;

/// The schedule: tile sizes, the KV order and the launch facts some kernels' bits depend on.
struct TileStage {
    int block_m = 128, block_n = 64;  // Br x Bc tiles of S; block_n 0: "auto", FlashAttention-2's as
                                      // PyTorch builds it (D <= 64: 128, D <= 128: 64); block_n
                                      // block_n_fa3_fp8: FlashAttention-3's FP8 tile for D,
                                      // block_n_mem_eff: the memory-efficient kernel's
    KvOrder kv_order = KvOrder::forward;
    int aten_threads = 0;  // the threads ATen's CPU kernel ran with (torch.get_num_threads()): its packed
                           // GEMM path depends on it; 0: unknown (refused where it matters)
    int split_kv_sms = 0;  // > 0: split KV where PyTorch's flash would on a GPU of this many SMs
                           // (num_splits_heuristic), its split kernel and combine (flash_split_kv.hpp)
    int kv_splits = 1;     // > 1: KV's tiles cut into this many runs, each its own online softmax pass
                           // (O left in float32), combined as FlashAttention-2's combine kernel does
                           // (flash_split_kv.hpp): a split-KV kernel of a fixed split count
    void validate(std::string_view recipe) const;
};

/// S = Q K^T and what happens to it before the softmax.
struct ScoreStage {
    Product product = Product::model;
    ScaleLog2 scale_log2 = ScaleLog2::float32;
    const BlockFormat* qk_quant = nullptr;          // Q and K quantized along D (the score product's
                                                    // reduction) in this block format, blocks of 32
    SoftcapTanh softcap_tanh = SoftcapTanh::exact;  // where the problem caps its scores
};

/// The softmax: its kind, and the choices of each kind.
struct SoftmaxStage {
    SoftmaxKind kind = SoftmaxKind::online;
    const Format* format = &f32;             // naive: the format of exp, sum and division;
                                             // online-torch: the format of S, row max and row sum
    const Format* row_sum_format = nullptr;  // naive and online-torch: the format the row sum l is
                                             // stored in, apart from S and m; null: `format`
    Exp2Kind exp2 = Exp2Kind::software;
    Exp2Arg exp2_arg = Exp2Arg::mul_sub;  // exp2's argument for P-bar, forward and backward
    RescaleArg rescale_arg = RescaleArg::scaled;
    RowSum row_sum = RowSum::sequential;
    bool max_adjust = false;  // Qiu & Yao's fix: no P-bar entry exactly 1
    float max_adjust_beta = 2;
    int max_offset = 0;  // k: exp2's argument taken against the max less k, so P-bar lies in [0, 2^k]
                         // before its cast (FlashAttention-3's FP8 forward: 8); l carries the 2^k
    bool naive() const { return kind == SoftmaxKind::naive || kind == SoftmaxKind::naive_unshifted; }
    /// The format the row sum is stored in (row_sum_format, or `format` where that is null).
    const Format& stored_row_sum() const { return row_sum_format != nullptr ? *row_sum_format : *format; }
    void validate(std::string_view recipe) const;
};

/// P, V and their product.
struct PvStage {
    const Format* p_format = &bf16;        // P is cast to it (times p_scale) before P V
    float p_scale = 1;                     // S: a power of two or 448
    const BlockFormat* p_quant = nullptr;  // each row's P * S quantized along keys in this block
                                           // format, blocks of 32, from float32 (online softmax)
    const BlockFormat* v_quant = nullptr;  // V quantized along tokens in this block format
    int v_block = 32;                      // the tokens sharing one V scale
    bool diagonal_fix = false;             // the diagonal tile of P multiplies unquantized V
    Product product = Product::model;      // P V
    PvDepth depth = PvDepth::keys;         // P V over a partial tile's keys or its whole width
    void validate(std::string_view recipe) const;
};

/// The running O and how a row ends.
struct OutputStage {
    const Format* accumulator = &f32;  // the running O: f32 (kernels), or e.g. bf16 where each block's
                                       // P V and the rescaled O are rounded to it (a flash attention
                                       // written in PyTorch on BF16 tensors)
    const Format* format = &bf16;      // O as written
    Epilogue epilogue = Epilogue::fa2;
};

/// The backward pass: delta, dS and the gradients' products.
struct BackwardStage {
    Product product = Product::model;  // dP, dV, dK and dQ
    DeltaKind delta = DeltaKind::stored_o;
    const Format* delta_format = &f32;          // delta from O: each dO * O and the sum rounded to it
                                                // (float32 accumulation), as PyTorch's BF16 ops do
    DeltaSum delta_sum = DeltaSum::sequential;  // with delta_format f32 (host only)
    GradSchedule schedule = GradSchedule::in_order;
    const Format* ds_format = &bf16;     // dS and P are cast to it before dK, dQ and dV
    const Format* grad_format = &bf16;   // dQ, dK, dV as written
    const BlockFormat* quant = nullptr;  // the products dP = dO V^T, dV = P^T dO, dK = dS^T Q,
                                         // dQ = dS K: both operands block-quantized in this
                                         // format, blocks of 32 along the product's reduction
                                         // axis, dequantized exactly into ds_format
    bool stochastic = false;             // quant's elements rounded stochastically (probability
                                         // exactly proportional), else to nearest even
    int seed = 0;                        // the stochastic rounding's seed
    void validate(std::string_view recipe) const;
};

struct AttentionRecipe {
    std::string name = "custom";
    TargetStage target;
    TileStage tiles;
    ScoreStage scores;
    SoftmaxStage softmax;
    PvStage p_and_v;
    OutputStage output;
    BackwardStage backward;
};

/// The named presets, in a fixed order.
std::span<const AttentionRecipe> recipe_presets();

/// The preset called `name`; throws Error naming it and listing the presets if there is none.
AttentionRecipe find_recipe(std::string_view name);

/// Applies one KEY=VALUE setting; throws Error naming the key (and what it accepts) otherwise.
void apply_setting(AttentionRecipe& recipe, std::string_view key_value);

/// Every setting as KEY -> VALUE, parseable by apply_setting.
std::map<std::string, std::string> recipe_settings(const AttentionRecipe& recipe);

/// One line per key with the values it accepts, for `roundscope recipes`.
std::map<std::string, std::string> recipe_keys();

/// What values a key takes, for a program that enumerates them (a search, `recipes --json`).
struct KeyDomain {
    enum class Kind : std::uint8_t {
        enumeration,       // exactly RecipeKey::values
        integer,           // min to max in steps of step (from min), and the words in `also`
        positive_float32,  // any positive float32 (RecipeKey::values are the ones presets use)
    };
    Kind kind = Kind::enumeration;
    long long min = 0, max = 0, step = 0;
    std::vector<std::string> also;
};

/// A recipe key as the settings table declares it.
struct RecipeKey {
    std::string key;
    std::string stage;                // the step it rounds in: target, tiles, scores, softmax, p-and-v, output,
                                      // backward
    std::string accepts;              // the values it accepts, in words (recipe_keys)
    std::string meaning;              // what it chooses, in one line
    std::string default_value;        // its value in a recipe no preset or setting changed
    std::vector<std::string> values;  // the values a walk over the key tries: all of a named key's and every
                                      // format; for numbers, those the presets and kernels use
    KeyDomain domain;
};

/// Every key, stage by stage, in the settings table's order.
std::vector<RecipeKey> recipe_key_table();

/// The KV tile width for head dimension d: block_n, or under "auto" (0) FlashAttention-2's as
/// PyTorch builds it for sm_80 and newer (D <= 64: 128, D <= 128: 64), under "mem-eff" the
/// memory-efficient kernel's (D <= 64: 64, D <= 128: 128); Error naming the recipe for auto or
/// mem-eff with D > 128.
int resolved_block_n(const AttentionRecipe& recipe, std::uint64_t d);

/// How many KV splits PyTorch's flash forward runs for `heads` (batch x heads) of n_q queries
/// and n_kv keys at head dimension d on a GPU of `sms` SMs (flash_api.cpp: set_params_splitkv,
/// num_splits_heuristic); 1: the non-split kernel.
int torch_flash_splits(std::uint64_t heads, std::uint64_t n_q, std::uint64_t n_kv, std::uint64_t d, int sms);

/// The head dimension FlashAttention-2's kernels are built for that runs a head of dimension d
/// (flash_api.cpp's dispatch: the next of 32, 64, 96, ..., 256); Error naming the recipe above
/// 256.
int flash_head_dim(const AttentionRecipe& recipe, std::uint64_t d);

/// PyTorch's flash backward tiles on an H100 (flash_bwd_launch_template.h, the branches an H100's
/// shared memory takes): rows x keys 128 x 128 for a kernel head dimension of 32 or 64, 64 x 128
/// for 96 and 128, 64 x 64 above.
struct BackwardTiles {
    int block_m = 0, block_n = 0;
};
BackwardTiles torch_flash_backward_tiles(const AttentionRecipe& recipe, std::uint64_t d);

/// Where the recipe's dQ is one of several the GPU can give: under grad_schedule=torch-flash with
/// more than one key block, each key block's dQ is added to the buffer by atomicAdd, in an order
/// the GPU does not fix (the emulator adds them in key order). Empty where dQ is determined, else
/// one line saying why.
std::string dq_order_note(const AttentionRecipe& recipe, std::uint64_t n_kv, std::uint64_t d);

/// Under grad_schedule=cudnn past the captured 128 queries and keys (two blocks of 64 each), one
/// line saying that the orders of the gradients' sums there are the recipe's, untested; else empty.
std::string cudnn_backward_note(const AttentionRecipe& recipe, std::uint64_t n_q, std::uint64_t n_kv);

/// Throws Error (naming the recipe and the key) for combinations the emulator cannot run: each
/// stage's own rules (tiles that are not multiples of 16, a choice of another softmax kind), then
/// those across stages (no tensor-core model for the inputs, a V block that does not divide
/// block_n under the diagonal fix).
void validate(const AttentionRecipe& recipe);

}  // namespace roundscope::emu
