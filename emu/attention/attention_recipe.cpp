#include "emu/attention/attention_recipe.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <vector>

#include "emu/mma/mma_model.hpp"
#include "lib/error.hpp"
#include "lib/named_values.hpp"

namespace roundscope::emu {
namespace {

AttentionRecipe fa2_bf16() {
    AttentionRecipe r;
    r.name = "fa2-bf16";
    return r;
}

AttentionRecipe fa3_bf16() {
    AttentionRecipe r;
    r.name = "fa3-bf16";
    r.block_n = 128;
    r.kv_order = KvOrder::reverse;
    return r;
}

AttentionRecipe fa3_fp8() {
    AttentionRecipe r = fa3_bf16();
    r.name = "fa3-fp8";
    r.input = &e4m3;
    r.instruction = "wgmma";
    r.p_format = &e4m3;
    r.p_scale = 256;  // FlashAttention-3's max offset of 8
    return r;
}

AttentionRecipe fp8_forward_order() {
    AttentionRecipe r = fa3_fp8();
    r.name = "fp8-forward-order";
    r.kv_order = KvOrder::forward;
    r.p_scale = 1;
    return r;
}

// The setup of arXiv:2606.06521's kernel-faithful experiments: Q, K and V in float32, so that
// only the cast of P to E4M3 rounds (products exact, rounded once to float32, O kept in
// float32), forward order and S = 1 as the baseline its fixes are measured against.
AttentionRecipe fp8_p_cast_only() {
    AttentionRecipe r = fp8_forward_order();
    r.name = "fp8-p-cast-only";
    r.input = &f32;
    r.score_product = r.pv_product = Product::f64;
    r.o_format = &f32;
    return r;
}

AttentionRecipe mxfp4_v(bool fixed) {
    AttentionRecipe r;
    r.name = fixed ? "mxfp4-v-fixed" : "mxfp4-v";
    r.v_quant = &mxfp4;
    r.diagonal_fix = fixed;
    return r;
}

AttentionRecipe naive(const Format& f) {
    AttentionRecipe r;
    r.name = std::string("naive-") + std::string(f.name);
    r.softmax = SoftmaxKind::naive;
    r.softmax_format = &f;
    if (f == f16) r.input = r.p_format = r.o_format = &f16;  // an all-FP16 model
    // naive-f32: the softmax in float32, P cast to BF16 for P V, as a BF16 model's separate
    // softmax kernel followed by a BF16 matmul does
    return r;
}

// FlashAttention-2 with Qiu & Yao's fix (arXiv:2510.04212): no P-bar entry exactly 1.
AttentionRecipe fa2_bf16_fixed() {
    AttentionRecipe r = fa2_bf16();
    r.name = "fa2-bf16-max-adjust";
    r.max_adjust = true;
    return r;
}

// FlashAttention-2's tiles with the running O in BF16 (a kernel with a BF16 accumulator for
// O): each tile's P-bar V and the rescaled O rounded to BF16, 64 keys at a time.
AttentionRecipe fa2_bf16_o_bf16() {
    AttentionRecipe r = fa2_bf16();
    r.name = "fa2-bf16-o-bf16";
    r.o_accumulator = &bf16;
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
    r.block_m = r.block_n = 512;
    r.softmax = SoftmaxKind::online_torch;
    r.softmax_format = &bf16;
    r.o_accumulator = &bf16;
    r.delta_format = &f32;
    return r;
}

const std::vector<AttentionRecipe>& presets() {
    static const std::vector<AttentionRecipe> all{
        fa2_bf16(),          fa2_bf16_fixed(),  fa2_bf16_o_bf16(), fa2_bf16_torch(), fa3_bf16(), fa3_fp8(),
        fp8_forward_order(), fp8_p_cast_only(), mxfp4_v(false),    mxfp4_v(true),    naive(f32), naive(f16)};
    return all;
}

// ---- one table of settings: key, accepted values, how to print and how to parse ----

// A setting's value by name; errors name the setting's key.
template <class Enum, std::size_t N>
Enum parse_setting(const NamedValues<Enum, N>& names, std::string_view key, std::string_view text) {
    return names.parse(fmt::format("recipe setting '{}'", key), text);
}

constexpr NamedValues<SoftmaxKind, 4> softmax_names{{{{SoftmaxKind::online, "online"},
                                                {SoftmaxKind::naive, "naive"},
                                                {SoftmaxKind::naive_unshifted, "naive-unshifted"},
                                                {SoftmaxKind::online_torch, "online-torch"}}}};
constexpr NamedValues<Exp2Kind, 2> exp2_names{
    {{{Exp2Kind::software, "software"}, {Exp2Kind::hardware_approx, "ex2.approx"}}}};
constexpr NamedValues<KvOrder, 2> order_names{{{{KvOrder::forward, "forward"}, {KvOrder::reverse, "reverse"}}}};
constexpr NamedValues<DeltaKind, 3> delta_names{
    {{{DeltaKind::stored_o, "o-stored"}, {DeltaKind::f32_o, "o-f32"}, {DeltaKind::p_dp, "p-dp"}}}};
constexpr NamedValues<bool, 2> switch_names{{{{false, "off"}, {true, "on"}}}};
constexpr NamedValues<Product, 2> product_names{{{{Product::model, "model"}, {Product::f64, "f64"}}}};

const Format* parse_format(std::string_view key, std::string_view text) {
    const Format* f = find_format(text);
    if (f == nullptr) throw Error(fmt::format("recipe setting '{}': unknown format '{}'", key, text));
    return f;
}

long parse_integer(std::string_view key, std::string_view text, long lo, long hi) {
    long v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size() || v < lo || v > hi)
        throw Error(fmt::format("recipe setting '{}': '{}' is not an integer in [{}, {}]", key, text, lo, hi));
    return v;
}

float parse_positive(std::string_view key, std::string_view text) {
    double v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size() || !(v > 0) || !std::isfinite(v) ||
        static_cast<double>(static_cast<float>(v)) != v)
        throw Error(fmt::format("recipe setting '{}': '{}' is not a positive float32 value", key, text));
    return static_cast<float>(v);
}

std::string number(double v) { return fmt::format("{}", v); }

struct Setting {
    std::string_view key;
    std::string accepts;
    std::string (*get)(const AttentionRecipe&);
    void (*set)(AttentionRecipe&, std::string_view key, std::string_view value);
};

const std::vector<Setting>& settings() {
    static const std::vector<Setting> table{
        {"input", "a format (q, k, v, dO rounded to it)",
         [](const AttentionRecipe& r) { return std::string(r.input->name); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.input = parse_format(k, v); }},
        {"arch", "sm80|sm89|sm90|sm100", [](const AttentionRecipe& r) { return r.arch; },
         [](AttentionRecipe& r, std::string_view, std::string_view v) { r.arch = std::string(v); }},
        {"instruction", "mma.sync|wgmma|tcgen05.mma", [](const AttentionRecipe& r) { return r.instruction; },
         [](AttentionRecipe& r, std::string_view, std::string_view v) { r.instruction = std::string(v); }},
        {"block_m", "Br, a multiple of 16", [](const AttentionRecipe& r) { return std::to_string(r.block_m); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) {
             r.block_m = static_cast<int>(parse_integer(k, v, 16, 1024));
         }},
        {"block_n", "Bc, a multiple of 16", [](const AttentionRecipe& r) { return std::to_string(r.block_n); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) {
             r.block_n = static_cast<int>(parse_integer(k, v, 16, 1024));
         }},
        {"score_product", product_names.list(),
         [](const AttentionRecipe& r) { return std::string(product_names.name(r.score_product)); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) {
             r.score_product = parse_setting(product_names, k, v);
         }},
        {"pv_product", product_names.list(),
         [](const AttentionRecipe& r) { return std::string(product_names.name(r.pv_product)); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.pv_product = parse_setting(product_names, k, v); }},
        {"softmax", softmax_names.list(),
         [](const AttentionRecipe& r) { return std::string(softmax_names.name(r.softmax)); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.softmax = parse_setting(softmax_names, k, v); }},
        {"softmax_format", "a format (naive and online-torch softmax)",
         [](const AttentionRecipe& r) { return std::string(r.softmax_format->name); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.softmax_format = parse_format(k, v); }},
        {"exp2", exp2_names.list(), [](const AttentionRecipe& r) { return std::string(exp2_names.name(r.exp2)); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.exp2 = parse_setting(exp2_names, k, v); }},
        {"max_adjust", switch_names.list(),
         [](const AttentionRecipe& r) { return std::string(switch_names.name(r.max_adjust)); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.max_adjust = parse_setting(switch_names, k, v); }},
        {"max_adjust_beta", "a positive number", [](const AttentionRecipe& r) { return number(r.max_adjust_beta); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.max_adjust_beta = parse_positive(k, v); }},
        {"p_format", "a format", [](const AttentionRecipe& r) { return std::string(r.p_format->name); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.p_format = parse_format(k, v); }},
        {"p_scale", "S > 0 (P * S is cast)", [](const AttentionRecipe& r) { return number(r.p_scale); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.p_scale = parse_positive(k, v); }},
        {"kv_order", order_names.list(),
         [](const AttentionRecipe& r) { return std::string(order_names.name(r.kv_order)); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.kv_order = parse_setting(order_names, k, v); }},
        {"v_quant", "none or a block format",
         [](const AttentionRecipe& r) { return std::string(r.v_quant ? r.v_quant->name : "none"); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) {
             if (v == "none") {
                 r.v_quant = nullptr;
                 return;
             }
             r.v_quant = find_block_format(v);
             if (r.v_quant == nullptr) throw Error(fmt::format("recipe setting '{}': unknown block format '{}'", k, v));
         }},
        {"v_block", "tokens per V scale", [](const AttentionRecipe& r) { return std::to_string(r.v_block); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) {
             r.v_block = static_cast<int>(parse_integer(k, v, 1, 1024));
         }},
        {"diagonal_fix", switch_names.list(),
         [](const AttentionRecipe& r) { return std::string(switch_names.name(r.diagonal_fix)); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.diagonal_fix = parse_setting(switch_names, k, v); }},
        {"o_format", "a format", [](const AttentionRecipe& r) { return std::string(r.o_format->name); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.o_format = parse_format(k, v); }},
        {"o_accumulator", "a format (the running O)",
         [](const AttentionRecipe& r) { return std::string(r.o_accumulator->name); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.o_accumulator = parse_format(k, v); }},
        {"delta", delta_names.list(), [](const AttentionRecipe& r) { return std::string(delta_names.name(r.delta)); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.delta = parse_setting(delta_names, k, v); }},
        {"delta_format", "a format (dO * O and delta, float32 sums)",
         [](const AttentionRecipe& r) { return std::string(r.delta_format->name); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.delta_format = parse_format(k, v); }},
        {"ds_format", "a format (dS, and P for dV)",
         [](const AttentionRecipe& r) { return std::string(r.ds_format->name); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.ds_format = parse_format(k, v); }},
        {"grad_format", "a format (dQ, dK, dV)",
         [](const AttentionRecipe& r) { return std::string(r.grad_format->name); },
         [](AttentionRecipe& r, std::string_view k, std::string_view v) { r.grad_format = parse_format(k, v); }},
    };
    return table;
}

}  // namespace

std::span<const AttentionRecipe> recipe_presets() { return presets(); }

AttentionRecipe find_recipe(std::string_view name) {
    std::string names;
    for (const AttentionRecipe& r : presets()) {
        if (r.name == name) return r;
        names += (names.empty() ? "" : ", ") + r.name;
    }
    throw Error(fmt::format("--recipe: unknown recipe '{}' (presets: {})", name, names));
}

void apply_setting(AttentionRecipe& recipe, std::string_view key_value) {
    const auto eq = key_value.find('=');
    if (eq == std::string_view::npos) throw Error(fmt::format("--set: '{}' is not KEY=VALUE", key_value));
    const std::string_view key = key_value.substr(0, eq), value = key_value.substr(eq + 1);
    for (const Setting& s : settings()) {
        if (s.key == key) {
            s.set(recipe, key, value);
            if (recipe.name.find('+') == std::string::npos) recipe.name += "+";
            return;
        }
    }
    std::string keys;
    for (const Setting& s : settings()) keys += (keys.empty() ? "" : ", ") + std::string(s.key);
    throw Error(fmt::format("--set: unknown recipe key '{}' (keys: {})", key, keys));
}

std::map<std::string, std::string> recipe_settings(const AttentionRecipe& recipe) {
    std::map<std::string, std::string> out;
    for (const Setting& s : settings()) out[std::string(s.key)] = s.get(recipe);
    return out;
}

std::map<std::string, std::string> recipe_keys() {
    std::map<std::string, std::string> out;
    for (const Setting& s : settings()) out[std::string(s.key)] = std::string(s.accepts);
    return out;
}

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
    if (r.v_quant != nullptr && r.diagonal_fix && r.block_n % r.v_block != 0)
        fail("v_block",
             fmt::format("the diagonal fix needs V blocks ({}) that divide block_n ({})", r.v_block, r.block_n));
    if ((r.softmax == SoftmaxKind::naive || r.softmax == SoftmaxKind::naive_unshifted) &&
        r.kv_order == KvOrder::reverse)
        fail("kv_order", "a naive softmax has no KV order");
}

std::string_view kv_order_name(KvOrder order) { return order_names.name(order); }

KvOrder parse_kv_order(std::string_view text, const std::string& what) { return order_names.parse(what, text); }

}  // namespace roundscope::emu
