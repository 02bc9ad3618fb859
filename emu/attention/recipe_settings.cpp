// The one table of a recipe's settings: each key, the values it accepts, how it prints and how
// it parses. A setting is one line: its kind (a format, a named value, an integer, a positive
// float32, a text) and the recipe field it holds.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "emu/attention/attention_recipe.hpp"
#include "lib/error.hpp"
#include "lib/named_values.hpp"
#include "lib/suggest.hpp"

namespace roundscope::emu {
namespace {

using R = AttentionRecipe;

constexpr NamedValues<SoftmaxKind, 5> softmax_names{{{{SoftmaxKind::online, "online"},
                                                      {SoftmaxKind::naive, "naive"},
                                                      {SoftmaxKind::naive_unshifted, "naive-unshifted"},
                                                      {SoftmaxKind::online_torch, "online-torch"},
                                                      {SoftmaxKind::compiled_torch, "compiled-torch"}}}};
constexpr NamedValues<Exp2Kind, 3> exp2_names{
    {{{Exp2Kind::software, "software"}, {Exp2Kind::hardware_approx, "ex2.approx"}, {Exp2Kind::cuda_exp2f, "exp2f"}}}};
constexpr NamedValues<ScaleLog2, 2> scale_log2_names{{{{ScaleLog2::f32, "f32"}, {ScaleLog2::f64, "f64"}}}};
constexpr NamedValues<Exp2Arg, 2> exp2_arg_names{{{{Exp2Arg::mul_sub, "mul-sub"}, {Exp2Arg::fma, "fma"}}}};
constexpr NamedValues<RescaleArg, 2> rescale_arg_names{{{{RescaleArg::scaled, "scaled"}, {RescaleArg::raw, "raw"}}}};
constexpr NamedValues<RowSum, 2> row_sum_names{
    {{{RowSum::sequential, "sequential"}, {RowSum::quad_ffma, "quad-ffma"}}}};
constexpr NamedValues<Epilogue, 2> epilogue_names{{{{Epilogue::fa2, "fa2"}, {Epilogue::torch_flash, "torch-flash"}}}};
constexpr NamedValues<KvOrder, 2> order_names{{{{KvOrder::forward, "forward"}, {KvOrder::reverse, "reverse"}}}};
constexpr NamedValues<DeltaKind, 3> delta_names{
    {{{DeltaKind::stored_o, "o-stored"}, {DeltaKind::f32_o, "o-f32"}, {DeltaKind::p_dp, "p-dp"}}}};
constexpr NamedValues<DeltaSum, 3> delta_sum_names{
    {{{DeltaSum::sequential, "sequential"}, {DeltaSum::lanes16, "lanes16"}, {DeltaSum::lanes32, "lanes32"}}}};
constexpr NamedValues<SoftcapTanh, 1> softcap_tanh_names{{{{SoftcapTanh::exact, "exact"}}}};
constexpr NamedValues<bool, 2> grad_rounding_names{{{{false, "nearest"}, {true, "stochastic"}}}};
constexpr NamedValues<bool, 2> switch_names{{{{false, "off"}, {true, "on"}}}};
constexpr NamedValues<Product, 2> product_names{{{{Product::model, "model"}, {Product::f64, "f64"}}}};
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
};

// One function per kind of setting; `Field` is the recipe member it holds.

template <const Format* R::*Field>
Setting format_setting(std::string_view key, std::string accepts) {
    return {key, std::move(accepts), [](const R& r) { return std::string((r.*Field)->name); },
            [](R& r, std::string_view k, std::string_view v) { r.*Field = parse_format(k, v); }};
}

template <auto Field, const auto& Names>
Setting named_setting(std::string_view key) {
    return {key, Names.list(), [](const R& r) { return std::string(Names.name(r.*Field)); },
            [](R& r, std::string_view k, std::string_view v) { r.*Field = Names.parse(what(k), v); }};
}

template <int R::*Field, int Lo, int Hi>
Setting integer_setting(std::string_view key, std::string accepts) {
    return {key, std::move(accepts), [](const R& r) { return std::to_string(r.*Field); },
            [](R& r, std::string_view k, std::string_view v) { r.*Field = parse_integer(k, v, Lo, Hi); }};
}

template <float R::*Field>
Setting positive_setting(std::string_view key, std::string accepts) {
    // Printed as the double it is, so that parse_positive reads back the same float32.
    return {key, std::move(accepts), [](const R& r) { return fmt::format("{}", static_cast<double>(r.*Field)); },
            [](R& r, std::string_view k, std::string_view v) { r.*Field = parse_positive(k, v); }};
}

template <std::string R::*Field>
Setting text_setting(std::string_view key, std::string accepts) {
    return {key, std::move(accepts), [](const R& r) { return r.*Field; },
            [](R& r, std::string_view, std::string_view v) { r.*Field = std::string(v); }};
}

const std::vector<Setting>& settings() {
    static const std::vector<Setting> table{
        format_setting<&R::input>("input", "a format (q, k, v, dO rounded to it)"),
        text_setting<&R::arch>("arch", "sm80|sm89|sm90|sm100"),
        text_setting<&R::instruction>("instruction", "mma.sync|wgmma|tcgen05.mma"),
        integer_setting<&R::block_m, 16, 1024>("block_m", "Br, a multiple of 16"),
        {"block_n", "Bc, a multiple of 16, or auto (PyTorch's flash tile for the head dimension)",
         [](const R& r) { return r.block_n == 0 ? std::string("auto") : std::to_string(r.block_n); },
         [](R& r, std::string_view k, std::string_view v) {
             r.block_n = v == "auto" ? 0 : parse_integer(k, v, 16, 1024);
         }},
        named_setting<&R::score_product, product_names>("score_product"),
        named_setting<&R::pv_product, product_names>("pv_product"),
        named_setting<&R::pv_depth, pv_depth_names>("pv_depth"),
        named_setting<&R::grad_product, product_names>("grad_product"),
        named_setting<&R::softmax, softmax_names>("softmax"),
        format_setting<&R::softmax_format>("softmax_format", "a format (naive and online-torch softmax)"),
        {"row_sum_format", "a format, or softmax (as softmax_format; naive and online-torch softmax)",
         [](const R& r) { return std::string(r.row_sum_format ? r.row_sum_format->name : "softmax"); },
         [](R& r, std::string_view k, std::string_view v) {
             r.row_sum_format = v == "softmax" ? nullptr : parse_format(k, v);
         }},
        named_setting<&R::exp2, exp2_names>("exp2"),
        named_setting<&R::exp2_arg, exp2_arg_names>("exp2_arg"),
        named_setting<&R::scale_log2, scale_log2_names>("scale_log2"),
        named_setting<&R::rescale_arg, rescale_arg_names>("rescale_arg"),
        named_setting<&R::row_sum, row_sum_names>("row_sum"),
        named_setting<&R::max_adjust, switch_names>("max_adjust"),
        positive_setting<&R::max_adjust_beta>("max_adjust_beta", "a positive number"),
        format_setting<&R::p_format>("p_format", "a format"),
        positive_setting<&R::p_scale>("p_scale", "S > 0 (P * S is cast)"),
        named_setting<&R::kv_order, order_names>("kv_order"),
        {"qk_quant", "none or a block format (Q and K along D, blocks of 32)",
         [](const R& r) { return std::string(r.qk_quant ? r.qk_quant->name : "none"); },
         [](R& r, std::string_view k, std::string_view v) { r.qk_quant = parse_block_format_or_none(k, v); }},
        {"p_quant", "none or a block format (each row's P along keys, blocks of 32; online softmax)",
         [](const R& r) { return std::string(r.p_quant ? r.p_quant->name : "none"); },
         [](R& r, std::string_view k, std::string_view v) { r.p_quant = parse_block_format_or_none(k, v); }},
        {"v_quant", "none or a block format",
         [](const R& r) { return std::string(r.v_quant ? r.v_quant->name : "none"); },
         [](R& r, std::string_view k, std::string_view v) { r.v_quant = parse_block_format_or_none(k, v); }},
        integer_setting<&R::v_block, 1, 1024>("v_block", "tokens per V scale"),
        named_setting<&R::diagonal_fix, switch_names>("diagonal_fix"),
        format_setting<&R::o_format>("o_format", "a format"),
        named_setting<&R::epilogue, epilogue_names>("epilogue"),
        named_setting<&R::softcap_tanh, softcap_tanh_names>("softcap_tanh"),
        integer_setting<&R::split_kv_sms, 0, 1024>(
            "split_kv_sms", "SMs of the GPU whose split-KV choice PyTorch's flash path follows (0: never split)"),
        format_setting<&R::o_accumulator>("o_accumulator", "a format (the running O)"),
        named_setting<&R::delta, delta_names>("delta"),
        format_setting<&R::delta_format>("delta_format", "a format (dO * O and delta, float32 sums)"),
        named_setting<&R::delta_sum, delta_sum_names>("delta_sum"),
        format_setting<&R::ds_format>("ds_format", "a format (dS, and P for dV)"),
        format_setting<&R::grad_format>("grad_format", "a format (dQ, dK, dV)"),
        {"grad_quant", "none or a block format (both operands of every backward product, blocks of 32 along its sum)",
         [](const R& r) { return std::string(r.grad_quant ? r.grad_quant->name : "none"); },
         [](R& r, std::string_view k, std::string_view v) { r.grad_quant = parse_block_format_or_none(k, v); }},
        named_setting<&R::grad_stochastic, grad_rounding_names>("grad_rounding"),
        integer_setting<&R::grad_seed, 0, 2147483647>("grad_seed", "the stochastic rounding's seed"),
    };
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

std::map<std::string, std::string> recipe_keys() {
    std::map<std::string, std::string> out;
    for (const Setting& s : settings()) out[std::string(s.key)] = std::string(s.accepts);
    return out;
}

std::string_view kv_order_name(KvOrder order) { return order_names.name(order); }

KvOrder parse_kv_order(std::string_view text, const std::string& what) { return order_names.parse(what, text); }

}  // namespace roundscope::emu
