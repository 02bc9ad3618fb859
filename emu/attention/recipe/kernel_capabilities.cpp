#include "emu/attention/recipe/kernel_capabilities.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "lib/error.hpp"

namespace roundscope::emu {
namespace {

// Every key the recipe has, each run in every value: the emulator's row, and the start of a kernel's.
std::vector<KeyCapability> every_key() {
    std::vector<KeyCapability> out;
    static const std::vector<RecipeKey> table = recipe_key_table();
    for (const RecipeKey& k : table) out.push_back({k.key, {"*"}, ""});
    return out;
}

// `base` with the given keys narrowed; each must be a recipe key (checked by unknown_keys's test).
std::vector<KeyCapability> narrowed(std::vector<KeyCapability> base, const std::vector<KeyCapability>& narrow) {
    for (const KeyCapability& n : narrow) {
        auto it = std::find_if(base.begin(), base.end(), [&](const KeyCapability& c) { return c.key == n.key; });
        if (it == base.end())
            base.push_back(n);  // not a recipe key: unknown_keys reports it
        else
            *it = n;
    }
    return base;
}

constexpr std::string_view fa2_default = "the CUDA twins run FlashAttention-2's choice";

// The mma.sync twins (gpu/kernels/flash_attention.cu): FlashAttention-2's forward and backward pass with
// the emulator's tiles and order, every product by mma.sync with both operands in one format.
std::vector<KeyCapability> twins() {
    return narrowed(
        every_key(),
        {
            {"instruction", {"mma.sync"}, "the CUDA twins issue mma.sync only"},
            {"input", {"bf16", "f16", "e4m3", "e5m2"}, "the formats mma.sync multiplies"},
            {"block_n", {"*", "!auto", "!fa3-fp8", "!mem-eff"}, "the CUDA twins need a fixed KV tile"},
            {"split_kv_sms", {"0"}, "the CUDA twins do not split KV"},
            {"kv_splits", {"1"}, "the CUDA twins do not split KV"},
            {"score_product", {"model"}, "the CUDA twins compute every product on the tensor cores"},
            {"scale_log2", {"f32"}, fa2_default},
            {"qk_quant", {"none"}, "the CUDA twins quantize V only"},
            {"softmax", {"online"}, "the CUDA twins run the online softmax only"},
            {"exp2",
             {"software", "ex2.approx", "ex2.approx.ftz"},
             "the CUDA twins run the software exp2, ex2.approx.f32 (what exp2f compiles to on sm_90) or "
             "ex2.approx.ftz.f32"},
            {"exp2_arg", {"mul-sub"}, fa2_default},
            {"rescale_arg", {"scaled"}, fa2_default},
            {"row_sum", {"sequential"}, fa2_default},
            {"max_offset", {"0"}, fa2_default},
            {"p_format", {"=input"}, "the CUDA twins multiply P and V in one format"},
            {"p_quant", {"none"}, "the CUDA twins quantize V only"},
            {"pv_product", {"model"}, "the CUDA twins compute every product on the tensor cores"},
            {"pv_depth", {"keys"}, "the CUDA twins' P V stops at a partial tile's last key"},
            {"o_accumulator", {"f32"}, "the CUDA twins keep the running O in float32"},
            {"epilogue", {"fa2"}, fa2_default},
            {"grad_product", {"model"}, "the CUDA twins compute every product on the tensor cores"},
            {"delta", {"o-stored", "o-f32"}, "the CUDA twins form delta from O"},
            {"delta_format", {"f32"}, "the CUDA twins sum delta in float32"},
            {"delta_sum", {"sequential"}, "the CUDA twins sum delta over the head dimension in order"},
            {"grad_schedule", {"in-order"}, "the CUDA twins run their own backward tiles"},
            {"ds_format", {"bf16", "f16"}, "the CUDA twins' backward kernels multiply dS and P in BF16 or FP16"},
            {"grad_quant", {"none"}, "the CUDA twins do not block-quantize the backward's operands"},
            {"grad_rounding", {"nearest"}, "the CUDA twins do not block-quantize the backward's operands"},
        });
}

// The Hopper forward kernel (gpu/kernels/hopper_flash.cu): h100-bf16's arithmetic, TMA and wgmma.
std::vector<KeyCapability> hopper() {
    constexpr std::string_view arithmetic = "the Hopper kernel is written for h100-bf16's arithmetic";
    return narrowed(
        every_key(),
        {
            {"input", {"bf16"}, "the Hopper kernel runs BF16 inputs"},
            {"arch", {"sm90"}, "the Hopper kernel multiplies by wgmma on sm90"},
            {"instruction", {"wgmma"}, "the Hopper kernel multiplies by wgmma on sm90"},
            {"block_m", {"128"}, "the Hopper kernel's tiles are 128 x 128"},
            {"block_n", {"128"}, "the Hopper kernel's tiles are 128 x 128"},
            {"split_kv_sms", {"0"}, "the Hopper kernel does not split KV"},
            {"kv_splits", {"1"}, "the Hopper kernel does not split KV"},
            {"score_product", {"model"}, "the Hopper kernel computes every product by wgmma"},
            {"qk_quant", {"none"}, "the Hopper kernel quantizes nothing"},
            {"scale_log2", {"f32", "f64"}, "the Hopper kernel folds the scale into exp2's constant (no scaled S)"},
            {"softmax", {"online"}, arithmetic},
            {"exp2",
             {"software", "ex2.approx", "ex2.approx.ftz"},
             "its exp2 is software, ex2.approx or ex2.approx.ftz"},
            {"row_sum", {"quad-ffma"}, arithmetic},
            {"max_adjust", {"off"}, arithmetic},
            {"max_offset", {"0"}, arithmetic},
            {"p_format", {"bf16"}, "the Hopper kernel runs a BF16 P"},
            {"p_quant", {"none"}, "the Hopper kernel quantizes nothing"},
            {"v_quant", {"none"}, "the Hopper kernel quantizes nothing"},
            {"pv_product", {"model"}, "the Hopper kernel computes every product by wgmma"},
            {"pv_depth", {"tile"}, "its P V runs over every k-step of a tile"},
            {"o_accumulator", {"f32"}, arithmetic},
            {"o_format", {"bf16"}, "the Hopper kernel writes a BF16 O"},
            {"epilogue", {"fa2"}, arithmetic},
            // the backward kernels (gpu/kernels/hopper_flash_backward.cu)
            {"grad_product", {"model"}, "the Hopper backward computes every product by wgmma"},
            {"delta", {"o-stored"}, "the Hopper backward forms delta from the stored O"},
            {"delta_format", {"f32"}, "the Hopper backward sums delta in float32"},
            {"delta_sum", {"sequential"}, "the Hopper backward sums delta over the head dimension in order"},
            {"grad_schedule", {"in-order"}, "the Hopper backward walks its tiles in order (no atomics: deterministic)"},
            {"ds_format", {"bf16"}, "the Hopper backward multiplies P and dS in BF16"},
            {"grad_format", {"bf16"}, "the Hopper backward writes BF16 gradients"},
            {"grad_quant", {"none"}, "the Hopper backward does not block-quantize its operands"},
            {"grad_rounding", {"nearest"}, "the Hopper backward does not block-quantize its operands"},
        });
}

// The FP8 Hopper forward kernel (gpu/kernels/hopper_fp8_flash.cu): h100-fp8's arithmetic, the
// BF16 kernel's TMA, ring and walk.
std::vector<KeyCapability> hopper_fp8() {
    constexpr std::string_view arithmetic = "the FP8 Hopper kernel is written for h100-fp8's arithmetic";
    return narrowed(
        hopper(),
        {
            {"input", {"e4m3"}, "the FP8 Hopper kernel runs E4M3 inputs"},
            {"block_m", {"128"}, "the FP8 Hopper kernel's tiles are FlashAttention-3's (block_n=fa3-fp8)"},
            {"block_n", {"fa3-fp8"}, "the FP8 Hopper kernel's tiles are FlashAttention-3's (block_n=fa3-fp8)"},
            {"softmax", {"online"}, arithmetic},
            {"exp2",
             {"ex2.approx.ftz"},
             "the FP8 Hopper kernel's exp2 is FlashAttention-3's, ex2.approx.ftz (built with fast math)"},
            {"row_sum", {"lane-tile"}, arithmetic},
            {"max_adjust", {"off"}, arithmetic},
            {"max_offset", {"*"}, ""},
            {"p_format", {"e4m3"}, "the FP8 Hopper kernel runs an E4M3 P"},
            {"p_scale", {"1"}, "the FP8 Hopper kernel's P is P-bar (the max offset scales it)"},
            {"o_accumulator", {"f32"}, arithmetic},
            {"epilogue", {"fa3"}, "the FP8 Hopper kernel ends as FlashAttention-3 does (epilogue=fa3)"},
        });
}

bool is_backward_key(std::string_view key) {
    static const std::map<std::string, std::string, std::less<>> stages = [] {
        std::map<std::string, std::string, std::less<>> out;
        for (const RecipeKey& k : recipe_key_table()) out[k.key] = k.stage;
        return out;
    }();
    const auto it = stages.find(key);
    return it != stages.end() && it->second == "backward";
}

}  // namespace

std::span<const KernelCapabilities> kernel_capabilities() {
    static const std::vector<KernelCapabilities> table{
        {"emulator", "the emulator (emu/attention/flash/flash_attention.hpp)", true, every_key()},
        {"twins", "the CUDA twins (gpu/kernels/flash_attention.cu; mma.sync)", true, twins()},
        {"hopper", "the Hopper kernels (gpu/kernels/hopper_flash.cu, hopper_flash_backward.cu; TMA and wgmma)", true,
         hopper()},
        {"hopper-fp8", "the FP8 Hopper forward kernel (gpu/kernels/hopper_fp8_flash.cu; TMA and E4M3 wgmma)", false,
         hopper_fp8()},
    };
    return table;
}

const KernelCapabilities& kernel_named(std::string_view name) {
    std::string names;
    for (const KernelCapabilities& k : kernel_capabilities()) {
        if (k.kernel == name) return k;
        names += (names.empty() ? "" : ", ") + std::string(k.kernel);
    }
    throw Error(fmt::format("unknown kernel '{}' (kernels: {})", name, names));
}

const KeyCapability* find_capability(const KernelCapabilities& kernel, std::string_view key) {
    const auto it =
        std::find_if(kernel.keys.begin(), kernel.keys.end(), [&](const KeyCapability& c) { return c.key == key; });
    return it == kernel.keys.end() ? nullptr : &*it;
}

bool runs_value(const KernelCapabilities& kernel, const AttentionRecipe& recipe, std::string_view key,
                std::string_view value) {
    const KeyCapability* it = find_capability(kernel, key);
    if (it == nullptr) return false;  // undeclared: refused (and a failing test)
    bool any = false;
    for (std::string_view run : it->runs) {
        if (run == "*") any = true;
        if (run == value) return true;
        if (run.starts_with('=')) {
            const auto settings = recipe_settings(recipe);
            const auto other = settings.find(std::string(run.substr(1)));
            if (other != settings.end() && other->second == value) return true;
        }
    }
    if (!any) return false;
    return std::none_of(it->runs.begin(), it->runs.end(),
                        [&](std::string_view run) { return run.starts_with('!') && run.substr(1) == value; });
}

std::string capability_refusal(const KernelCapabilities& kernel, const AttentionRecipe& recipe, bool backward) {
    if (backward && !kernel.backward) return fmt::format("{} has no backward pass", kernel.title);
    for (const auto& [key, value] : recipe_settings(recipe)) {
        if (!backward && !kernel.backward && is_backward_key(key)) continue;
        if (runs_value(kernel, recipe, key, value)) continue;
        const KeyCapability* it = find_capability(kernel, key);
        if (it == nullptr) return fmt::format("{}={}: {} does not declare this key", key, value, kernel.title);
        return fmt::format("{}={}: {} ({} runs {})", key, value, it->why, key, runs_in_words(*it));
    }
    return {};
}

std::vector<std::string> undeclared_keys(const KernelCapabilities& kernel) {
    std::vector<std::string> out;
    for (const RecipeKey& k : recipe_key_table()) {
        if (find_capability(kernel, k.key) == nullptr) out.push_back(k.key);
    }
    return out;
}

std::vector<std::string> unknown_keys(const KernelCapabilities& kernel) {
    const std::vector<RecipeKey> table = recipe_key_table();
    std::vector<std::string> out;
    for (const KeyCapability& c : kernel.keys) {
        if (std::none_of(table.begin(), table.end(), [&](const RecipeKey& k) { return k.key == c.key; }))
            out.emplace_back(c.key);
    }
    return out;
}

std::string runs_in_words(const KeyCapability& capability) {
    std::string values, except;
    bool any = false;
    for (std::string_view run : capability.runs) {
        if (run == "*")
            any = true;
        else if (run.starts_with('!'))
            except += (except.empty() ? "" : ", ") + std::string(run.substr(1));
        else if (run.starts_with('='))
            values += (values.empty() ? "as " : ", as ") + std::string(run.substr(1));
        else
            values += (values.empty() ? "" : ", ") + std::string(run);
    }
    if (any) return except.empty() ? "every value" : "every value but " + except;
    return values;
}

}  // namespace roundscope::emu
