// The one table of a recipe's settings: each key, the values it accepts, how it prints and how
// it parses. A setting is one line: its kind (a format, a named value, an integer, a positive
// float32, a text) and the recipe field it holds.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "emu/attention/recipe/attention_recipe.hpp"
#include "lib/error.hpp"
#include "lib/named_values.hpp"
#include "lib/suggest.hpp"

namespace roundscope::emu {
namespace {

using R = AttentionRecipe;

constexpr NamedValues<SoftmaxKind, 8> softmax_names{{{{SoftmaxKind::online, "online"},
                                                      {SoftmaxKind::naive, "naive"},
                                                      {SoftmaxKind::naive_unshifted, "naive-unshifted"},
                                                      {SoftmaxKind::online_torch, "online-torch"},
                                                      {SoftmaxKind::compiled_torch, "compiled-torch"},
                                                      {SoftmaxKind::aten_cpu, "aten-cpu"},
                                                      {SoftmaxKind::cuda_math, "cuda-math"},
                                                      {SoftmaxKind::aten_cpu_math, "aten-cpu-math"}}}};
constexpr NamedValues<Exp2Kind, 4> exp2_names{{{{Exp2Kind::software, "software"},
                                                {Exp2Kind::hardware_approx, "ex2.approx"},
                                                {Exp2Kind::cuda_exp2f, "exp2f"},
                                                {Exp2Kind::hardware_ftz, "ex2.approx.ftz"}}}};
constexpr NamedValues<ScaleLog2, 3> scale_log2_names{
    {{{ScaleLog2::float32, "f32"}, {ScaleLog2::float64, "f64"}, {ScaleLog2::scale_first, "scale-first"}}}};
constexpr NamedValues<Exp2Arg, 2> exp2_arg_names{{{{Exp2Arg::mul_sub, "mul-sub"}, {Exp2Arg::fma, "fma"}}}};
constexpr NamedValues<RescaleArg, 2> rescale_arg_names{{{{RescaleArg::scaled, "scaled"}, {RescaleArg::raw, "raw"}}}};
constexpr NamedValues<RowSum, 5> row_sum_names{{{{RowSum::sequential, "sequential"},
                                                 {RowSum::quad_ffma, "quad-ffma"},
                                                 {RowSum::lane_tile, "lane-tile"},
                                                 {RowSum::cudnn, "cudnn"},
                                                 {RowSum::mem_eff, "mem-eff"}}}};
constexpr NamedValues<Epilogue, 5> epilogue_names{{{{Epilogue::fa2, "fa2"},
                                                    {Epilogue::torch_flash, "torch-flash"},
                                                    {Epilogue::fa3, "fa3"},
                                                    {Epilogue::cudnn, "cudnn"},
                                                    {Epilogue::mem_eff, "mem-eff"}}}};
constexpr NamedValues<CpuVector, 2> cpu_vector_names{{{{CpuVector::avx512, "avx512"}, {CpuVector::avx2, "avx2"}}}};
constexpr NamedValues<KvOrder, 2> order_names{{{{KvOrder::forward, "forward"}, {KvOrder::reverse, "reverse"}}}};
constexpr NamedValues<DeltaKind, 3> delta_names{
    {{{DeltaKind::stored_o, "o-stored"}, {DeltaKind::f32_o, "o-f32"}, {DeltaKind::p_dp, "p-dp"}}}};
constexpr NamedValues<DeltaSum, 5> delta_sum_names{{{{DeltaSum::sequential, "sequential"},
                                                     {DeltaSum::lanes16, "lanes16"},
                                                     {DeltaSum::lanes32, "lanes32"},
                                                     {DeltaSum::fa2_threads, "fa2-threads"},
                                                     {DeltaSum::mem_eff_threads, "mem-eff-threads"}}}};
constexpr NamedValues<GradSchedule, 4> grad_schedule_names{{{{GradSchedule::in_order, "in-order"},
                                                             {GradSchedule::torch_flash, "torch-flash"},
                                                             {GradSchedule::mem_eff, "mem-eff"},
                                                             {GradSchedule::cudnn, "cudnn"}}}};
constexpr NamedValues<SoftcapTanh, 1> softcap_tanh_names{{{{SoftcapTanh::exact, "exact"}}}};
constexpr NamedValues<bool, 2> grad_rounding_names{{{{false, "nearest"}, {true, "stochastic"}}}};
constexpr NamedValues<bool, 2> switch_names{{{{false, "off"}, {true, "on"}}}};
constexpr NamedValues<Product, 6> product_names{{{{Product::model, "model"},
                                                  {Product::exact_f64, "f64"},
                                                  {Product::amx, "amx"},
                                                  {Product::ffma, "ffma"},
                                                  {Product::avx512_bf16, "avx512-bf16"},
                                                  {Product::mkl_avx2, "mkl-avx2"}}}};
// the backward's: ATen's CPU backward runs its own products (aten_cpu_backward.hpp), no other the CPU's
constexpr NamedValues<Product, 2> grad_product_names{{{{Product::model, "model"}, {Product::exact_f64, "f64"}}}};
constexpr NamedValues<PvDepth, 2> pv_depth_names{{{{PvDepth::keys, "keys"}, {PvDepth::tile, "tile"}}}};

std::string what(std::string_view key) { return fmt::format("recipe setting '{}'", key); }

const Format* parse_format(std::string_view key, std::string_view text) {
    const Format* f = find_format(text);
    if (f == nullptr) throw Error(fmt::format("{}: unknown format '{}'", what(key), printable(text)));
    return f;
}

int parse_integer(std::string_view key, std::string_view text, int lo, int hi) {
    int v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size() || v < lo || v > hi)
        throw Error(fmt::format("{}: '{}' is not an integer in [{}, {}]", what(key), printable(text), lo, hi));
    return v;
}

float parse_positive(std::string_view key, std::string_view text) {
    double v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size() || !(v > 0) || !std::isfinite(v) ||
        static_cast<double>(static_cast<float>(v)) != v)
        throw Error(fmt::format("{}: '{}' is not a positive float32 value", what(key), printable(text)));
    return static_cast<float>(v);
}

const BlockFormat* parse_block_format_or_none(std::string_view key, std::string_view text) {
    if (text == "none") return nullptr;
    try {
        return &block_format_named(text);
    } catch (const Error& e) {
        throw Error(fmt::format("{}: {}", what(key), e.what()));
    }
}

struct Setting {
    std::string_view key;
    std::string accepts;
    std::string (*get)(const R&);
    void (*set)(R&, std::string_view key, std::string_view value);
    std::vector<std::string> values;  // what a walk over the key tries (RecipeKey::values)
    std::string_view stage;           // filled in by settings() from the stage tables
    KeyDomain domain{};               // default: an enumeration of `values`
};

KeyDomain integers(long long lo, long long hi, long long step, std::vector<std::string> also = {}) {
    return {KeyDomain::Kind::integer, lo, hi, step, std::move(also)};
}

std::vector<std::string> format_values() {
    std::vector<std::string> out;
    for (const Format& f : all_formats) out.emplace_back(f.name);
    return out;
}

std::vector<std::string> block_format_values() {
    std::vector<std::string> out{"none"};
    for (const BlockFormat& f : all_block_formats) out.emplace_back(f.name);
    return out;
}

template <class Enum, std::size_t N>
std::vector<std::string> named_values(const NamedValues<Enum, N>& names) {
    std::vector<std::string> out;
    for (const auto& [value, text] : names.entries) out.emplace_back(text);
    return out;
}

// One function per kind of setting; `Stage` and `Field` name the recipe member it holds.

template <auto Stage, auto Field>
auto& field(R& r) {
    return (r.*Stage).*Field;
}

template <auto Stage, auto Field>
const auto& field(const R& r) {
    return (r.*Stage).*Field;
}

template <auto Stage, auto Field>
Setting format_setting(std::string_view key, std::string accepts) {
    return {key, std::move(accepts), [](const R& r) { return std::string(field<Stage, Field>(r)->name); },
            [](R& r, std::string_view k, std::string_view v) { field<Stage, Field>(r) = parse_format(k, v); },
            format_values()};
}

template <auto Stage, auto Field, const auto& Names>
Setting named_setting(std::string_view key) {
    return {key, Names.list(), [](const R& r) { return std::string(Names.name(field<Stage, Field>(r))); },
            [](R& r, std::string_view k, std::string_view v) { field<Stage, Field>(r) = Names.parse(what(k), v); },
            named_values(Names)};
}

template <auto Stage, auto Field, int Lo, int Hi>
Setting integer_setting(std::string_view key, std::string accepts, std::vector<std::string> values, int step = 1) {
    return {key,
            std::move(accepts),
            [](const R& r) { return std::to_string(field<Stage, Field>(r)); },
            [](R& r, std::string_view k, std::string_view v) { field<Stage, Field>(r) = parse_integer(k, v, Lo, Hi); },
            std::move(values),
            {},
            integers(Lo, Hi, step)};
}

template <auto Stage, auto Field>
Setting positive_setting(std::string_view key, std::string accepts, std::vector<std::string> values) {
    // Printed as the double it is, so that parse_positive reads back the same float32.
    return {key,
            std::move(accepts),
            [](const R& r) { return fmt::format("{}", static_cast<double>(field<Stage, Field>(r))); },
            [](R& r, std::string_view k, std::string_view v) { field<Stage, Field>(r) = parse_positive(k, v); },
            std::move(values),
            {},
            {KeyDomain::Kind::positive_float32, 0, 0, 0, {}}};
}

template <auto Stage, auto Field>
Setting text_setting(std::string_view key, std::vector<std::string> values) {
    std::string accepts;
    for (const std::string& v : values) accepts += (accepts.empty() ? "" : "|") + v;
    return {key, std::move(accepts), [](const R& r) { return field<Stage, Field>(r); },
            [](R& r, std::string_view, std::string_view v) { field<Stage, Field>(r) = std::string(v); },
            std::move(values)};
}

template <auto Stage, auto Field>
Setting block_format_setting(std::string_view key, std::string accepts) {
    return {
        key, std::move(accepts),
        [](const R& r) {
            const BlockFormat* f = field<Stage, Field>(r);
            return std::string(f != nullptr ? f->name : "none");
        },
        [](R& r, std::string_view k, std::string_view v) { field<Stage, Field>(r) = parse_block_format_or_none(k, v); },
        block_format_values()};
}

// The table, stage by stage (RecipeKey::stage): a key's stage is the step of the kernel it rounds in.
std::vector<Setting> target_settings() {
    return {
        format_setting<&R::target, &TargetStage::input>("input", "a format (q, k, v, dO rounded to it)"),
        text_setting<&R::target, &TargetStage::arch>("arch", {"sm80", "sm89", "sm90", "sm100"}),
        text_setting<&R::target, &TargetStage::instruction>("instruction",
                                                            {"mma.sync", "mma.sync.m16n8k8", "wgmma", "tcgen05.mma"}),
        named_setting<&R::target, &TargetStage::cpu_vector, cpu_vector_names>("cpu_vector"),
    };
}

std::vector<Setting> tile_settings() {
    return {
        integer_setting<&R::tiles, &TileStage::block_m, 16, 1024>("block_m", "Br, a multiple of 16",
                                                                  {"16", "32", "64", "128"}, 16),
        {"block_n",
         "Bc, a multiple of 16, auto (PyTorch's flash tile for the head dimension), fa3-fp8 "
         "(FlashAttention-3's FP8 tile for it) or mem-eff (PyTorch's memory-efficient kernel's)",
         [](const R& r) {
             return r.tiles.block_n == 0                 ? std::string("auto")
                    : r.tiles.block_n == block_n_fa3_fp8 ? std::string("fa3-fp8")
                    : r.tiles.block_n == block_n_mem_eff ? std::string("mem-eff")
                                                         : std::to_string(r.tiles.block_n);
         },
         [](R& r, std::string_view k, std::string_view v) {
             r.tiles.block_n = v == "auto"      ? 0
                               : v == "fa3-fp8" ? block_n_fa3_fp8
                               : v == "mem-eff" ? block_n_mem_eff
                                                : parse_integer(k, v, 16, 1024);
         },
         {"auto", "fa3-fp8", "mem-eff", "16", "32", "64", "128", "256", "512"},
         {},
         integers(16, 1024, 16, {"auto", "fa3-fp8", "mem-eff"})},
        named_setting<&R::tiles, &TileStage::kv_order, order_names>("kv_order"),
        integer_setting<&R::tiles, &TileStage::aten_threads, 0, 65536>(
            "aten_threads", "the threads ATen's CPU kernel ran with (0: unknown, refused where it matters)",
            {"0", "1", "2", "8", "64"}),
        integer_setting<&R::tiles, &TileStage::split_kv_sms, 0, 1024>(
            "split_kv_sms", "SMs of the GPU whose split-KV choice PyTorch's flash path follows (0: never split)",
            {"0", "1", "132"}),
        integer_setting<&R::tiles, &TileStage::kv_splits, 1, 1024>(
            "kv_splits", "how many runs of whole KV tiles are softmaxed apart, then combined (1: none)",
            {"1", "2", "3", "4"}),
    };
}

std::vector<Setting> score_settings() {
    return {
        named_setting<&R::scores, &ScoreStage::product, product_names>("score_product"),
        named_setting<&R::scores, &ScoreStage::scale_log2, scale_log2_names>("scale_log2"),
        block_format_setting<&R::scores, &ScoreStage::qk_quant>(
            "qk_quant", "none or a block format (Q and K along D, blocks of 32)"),
        named_setting<&R::scores, &ScoreStage::softcap_tanh, softcap_tanh_names>("softcap_tanh"),
    };
}

std::vector<Setting> softmax_settings() {
    return {
        named_setting<&R::softmax, &SoftmaxStage::kind, softmax_names>("softmax"),
        format_setting<&R::softmax, &SoftmaxStage::format>("softmax_format",
                                                           "a format (naive and online-torch softmax)"),
        {"row_sum_format", "a format, or softmax (as softmax_format; naive, online-torch and compiled-torch softmax)",
         [](const R& r) { return std::string(r.softmax.row_sum_format ? r.softmax.row_sum_format->name : "softmax"); },
         [](R& r, std::string_view k, std::string_view v) {
             r.softmax.row_sum_format = v == "softmax" ? nullptr : parse_format(k, v);
         },
         [] {
             std::vector<std::string> v{"softmax"};
             for (std::string& f : format_values()) v.push_back(std::move(f));
             return v;
         }()},
        named_setting<&R::softmax, &SoftmaxStage::exp2, exp2_names>("exp2"),
        named_setting<&R::softmax, &SoftmaxStage::exp2_arg, exp2_arg_names>("exp2_arg"),
        named_setting<&R::softmax, &SoftmaxStage::rescale_arg, rescale_arg_names>("rescale_arg"),
        named_setting<&R::softmax, &SoftmaxStage::row_sum, row_sum_names>("row_sum"),
        named_setting<&R::softmax, &SoftmaxStage::max_adjust, switch_names>("max_adjust"),
        positive_setting<&R::softmax, &SoftmaxStage::max_adjust_beta>("max_adjust_beta", "a positive number",
                                                                      {"2", "8"}),
        integer_setting<&R::softmax, &SoftmaxStage::max_offset, 0, 30>(
            "max_offset", "k, an integer in [0, 30] (online softmax)", {"0", "8"}),
    };
}

std::vector<Setting> pv_settings() {
    return {
        format_setting<&R::p_and_v, &PvStage::p_format>("p_format", "a format"),
        positive_setting<&R::p_and_v, &PvStage::p_scale>("p_scale", "S > 0 (P * S is cast)", {"1", "256", "448"}),
        block_format_setting<&R::p_and_v, &PvStage::p_quant>(
            "p_quant",
            "none or a block format (each row's P along keys, blocks of 32; online "
            "softmax)"),
        block_format_setting<&R::p_and_v, &PvStage::v_quant>("v_quant", "none or a block format"),
        integer_setting<&R::p_and_v, &PvStage::v_block, 1, 1024>("v_block", "tokens per V scale", {"16", "32"}),
        named_setting<&R::p_and_v, &PvStage::diagonal_fix, switch_names>("diagonal_fix"),
        named_setting<&R::p_and_v, &PvStage::product, product_names>("pv_product"),
        named_setting<&R::p_and_v, &PvStage::depth, pv_depth_names>("pv_depth"),
    };
}

std::vector<Setting> output_settings() {
    return {
        format_setting<&R::output, &OutputStage::accumulator>("o_accumulator", "a format (the running O)"),
        format_setting<&R::output, &OutputStage::format>("o_format", "a format"),
        named_setting<&R::output, &OutputStage::epilogue, epilogue_names>("epilogue"),
    };
}

std::vector<Setting> backward_settings() {
    return {
        named_setting<&R::backward, &BackwardStage::product, grad_product_names>("grad_product"),
        named_setting<&R::backward, &BackwardStage::delta, delta_names>("delta"),
        format_setting<&R::backward, &BackwardStage::delta_format>("delta_format",
                                                                   "a format (dO * O and delta, float32 sums)"),
        named_setting<&R::backward, &BackwardStage::delta_sum, delta_sum_names>("delta_sum"),
        named_setting<&R::backward, &BackwardStage::schedule, grad_schedule_names>("grad_schedule"),
        format_setting<&R::backward, &BackwardStage::ds_format>("ds_format", "a format (dS, and P for dV)"),
        format_setting<&R::backward, &BackwardStage::grad_format>("grad_format", "a format (dQ, dK, dV)"),
        block_format_setting<&R::backward, &BackwardStage::quant>(
            "grad_quant",
            "none or a block format (both operands of every backward product, blocks of 32 along its sum)"),
        named_setting<&R::backward, &BackwardStage::stochastic, grad_rounding_names>("grad_rounding"),
        integer_setting<&R::backward, &BackwardStage::seed, 0, 2147483647>(
            "grad_seed", "the stochastic rounding's seed", {"0", "1"}),
    };
}

// What each key chooses, one line each: the reference docs/recipe-keys.md prints them.
const std::map<std::string_view, std::string_view>& meanings() {
    static const std::map<std::string_view, std::string_view> m{
        {"input", "the format q, k, v and dO are rounded to (RNE) before anything else"},
        {"arch", "the GPU architecture whose tensor-core model computes every product"},
        {"instruction",
         "the tensor-core instruction modelled: mma.sync, mma.sync.m16n8k8 (8 products a step, as CUTLASS's SM80 "
         "BF16 and FP16 tiles issue it), wgmma (sm90) or tcgen05.mma (sm100)"},
        {"cpu_vector",
         "the vectors PyTorch's CPU code ran with, whose lanes its sums follow: avx512 (16 floats) or avx2 (8; "
         "compiled-torch only)"},
        {"block_m", "Br, the rows of a tile of S: a schedule, which changes no bits (rows are independent)"},
        {"block_n", "Bc, the keys of a tile of S: where the running max, the rescale and P V's chains restart"},
        {"kv_order", "the order the KV tiles are visited: forward, or reverse as FlashAttention-3 does"},
        {"aten_threads", "torch.get_num_threads() of the run: whether ATen's CPU kernel packs its GEMM operands"},
        {"split_kv_sms", "split KV as PyTorch's flash path would on a GPU of this many SMs, then combine"},
        {"kv_splits",
         "split KV into this many runs of whole tiles (ceil(tiles / splits) each), each an online softmax pass with "
         "O in float32, combined as FlashAttention-2's combine kernel does (libdevice expf and logf)"},
        {"score_product",
         "S = Q K^T by the tensor-core model, exactly in float64 rounded once, by AMX (ATen's CPU GEMM), by "
         "AVX512-BF16 (the same GEMM on a CPU without AMX), by MKL's AVX2 kernel (the GEMM on an AMD CPU), or by a "
         "float32 FFMA chain over D in order (cuBLAS's "
         "SIMT SGEMM: softmax=cuda-math)"},
        {"scale_log2",
         "the constant scale log2(e): a float32 product, rounded once from double, or S times the scale first "
         "(rounded), then times RN(log2 e)"},
        {"qk_quant", "Q and K block-quantized along D (blocks of 32) before S = Q K^T"},
        {"softcap_tanh", "how a soft cap's tanh rounds (where the problem caps its scores)"},
        {"softmax",
         "the softmax: online (flash), naive, naive without the max shift, PyTorch's ops, ATen's CPU flash, "
         "PyTorch's math path on a GPU (float32 ops, ATen's warp softmax with libdevice's expf), or on a CPU "
         "(float32 ops, ATen's vectorized softmax with SLEEF's expf)"},
        {"softmax_format", "naive and online-torch: the format of exp, the sums and the division"},
        {"row_sum_format",
         "naive, online-torch and compiled-torch: the format the row sum is stored in (compiled: the buffer "
         "O's division reloads past one bucket)"},
        {"exp2",
         "exp2: the project's correctly written software exp2, ex2.approx.f32, CUDA's exp2f, or "
         "ex2.approx.ftz.f32 (exp2f under fast math)"},
        {"exp2_arg", "exp2's argument: the product rounded, then the max subtracted, or one fma"},
        {"rescale_arg", "the rescale's argument: the difference of the scaled maxima, or of the raw ones"},
        {"row_sum",
         "the order of the row sum l: sequential, FlashAttention-2's four lanes, FlashAttention-3's, cuDNN's, or "
         "PyTorch's memory-efficient kernel's"},
        {"max_adjust", "Qiu and Yao's fix: the max raised so that no P-bar entry is exactly 1"},
        {"max_adjust_beta", "the max adjustment's beta"},
        {"max_offset", "k: exp2's argument against the max less k, P-bar in [0, 2^k] before its cast (FA3's FP8: 8)"},
        {"p_format", "the format P (times p_scale) is cast to before P V"},
        {"p_scale", "S: P is multiplied by it before its cast (a power of two or 448), O divided after"},
        {"p_quant", "each row's P block-quantized along keys (blocks of 32) before P V"},
        {"v_quant", "V block-quantized along tokens before P V"},
        {"v_block", "the tokens sharing one V scale"},
        {"diagonal_fix", "the diagonal tile of P multiplies the unquantized V"},
        {"pv_product",
         "P V by the tensor-core model, exactly in float64 rounded once, by AMX (ATen's CPU GEMM), by AVX512-BF16 "
         "(the same GEMM on a CPU without AMX), by MKL's AVX2 kernel (the GEMM on an AMD CPU), or by a float32 FFMA "
         "chain over the keys in order (cuBLAS's SIMT "
         "SGEMM: softmax=cuda-math)"},
        {"pv_depth", "P V over a partial tile: over its keys, or over the whole tile (zero products)"},
        {"o_accumulator",
         "the format of the running O (f32 in kernels); under compiled-torch that of P-bar V, the running O "
         "staying float32"},
        {"o_format", "the format O is written in"},
        {"epilogue",
         "how a row ends (O, its LSE, an empty row): FlashAttention-2's, PyTorch's flash, FlashAttention-3's, "
         "cuDNN's or PyTorch's memory-efficient kernel's"},
        {"grad_product", "the backward's products by the tensor-core model, or exactly in float64"},
        {"delta", "delta = rowsum(dO * O) from the stored O, O in float32, or rowsum(P * dP)"},
        {"delta_format", "the format each dO * O and delta's sum are rounded to"},
        {"delta_sum",
         "the order of delta's float32 sum over the head dimension (lanes16, lanes32: one and two vectors, of 8 "
         "lanes under cpu_vector=avx2; fa2-threads: FlashAttention-2's threads, each over 8 features a page, "
         "then a butterfly; mem-eff-threads: the memory-efficient backward's two or four threads a row)"},
        {"grad_schedule",
         "the backward's tiles: in order (dQ summed in registers), or PyTorch's flash backward on an H100 (its "
         "tiles, row blocks in reverse, dQ added tile by tile to a zeroed float32 buffer), or PyTorch's "
         "memory-efficient backward (its split keys' block orders, P by expf from the natural LSE, dS times the "
         "scale, dQ chained over key blocks)"},
        {"ds_format", "the format dS and P are cast to before dK, dQ and dV"},
        {"grad_format", "the format dQ, dK and dV are written in"},
        {"grad_quant", "both operands of every backward product block-quantized along its sum"},
        {"grad_rounding", "grad_quant's elements rounded to nearest even, or stochastically"},
        {"grad_seed", "the stochastic rounding's seed"},
    };
    return m;
}

const std::vector<Setting>& settings() {
    static const std::vector<Setting> table = [] {
        const std::pair<std::string_view, std::vector<Setting> (*)()> stages[] = {
            {"target", target_settings},    {"tiles", tile_settings}, {"scores", score_settings},
            {"softmax", softmax_settings},  {"p-and-v", pv_settings}, {"output", output_settings},
            {"backward", backward_settings}};
        std::vector<Setting> out;
        for (const auto& [stage, make] : stages) {
            for (Setting& s : make()) {
                s.stage = stage;
                out.push_back(std::move(s));
            }
        }
        return out;
    }();
    return table;
}

}  // namespace

void apply_setting(AttentionRecipe& recipe, std::string_view key_value) {
    const auto eq = key_value.find('=');
    if (eq == std::string_view::npos) throw Error(fmt::format("'{}' is not KEY=VALUE", printable(key_value)));
    const std::string_view key = key_value.substr(0, eq), value = key_value.substr(eq + 1);
    for (const Setting& s : settings()) {
        if (s.key == key) {
            s.set(recipe, key, value);
            if (recipe.name.find('+') == std::string::npos) recipe.name += "+";
            return;
        }
    }
    std::string keys;
    std::vector<std::string> known;
    for (const Setting& s : settings()) {
        keys += (keys.empty() ? "" : ", ") + std::string(s.key);
        known.emplace_back(s.key);
    }
    throw Error(fmt::format("unknown recipe key '{}'{} (keys: {})", printable(key), did_you_mean(key, known), keys));
}

std::map<std::string, std::string> recipe_settings(const AttentionRecipe& recipe) {
    std::map<std::string, std::string> out;
    for (const Setting& s : settings()) out[std::string(s.key)] = s.get(recipe);
    return out;
}

std::vector<RecipeKey> recipe_key_table() {
    std::vector<RecipeKey> out;
    const AttentionRecipe defaults;
    for (const Setting& s : settings()) {
        const auto meaning = meanings().find(s.key);
        if (meaning == meanings().end()) throw Error(fmt::format("recipe key '{}' has no meaning written", s.key));
        out.push_back({std::string(s.key), std::string(s.stage), s.accepts, std::string(meaning->second),
                       s.get(defaults), s.values, s.domain});
    }
    return out;
}

std::map<std::string, std::string> recipe_keys() {
    std::map<std::string, std::string> out;
    for (const Setting& s : settings()) out[std::string(s.key)] = std::string(s.accepts);
    return out;
}

std::string_view kv_order_name(KvOrder order) { return order_names.name(order); }

KvOrder parse_kv_order(std::string_view text, const std::string& what) { return order_names.parse(what, text); }

}  // namespace roundscope::emu
