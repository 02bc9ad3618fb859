#include "emu/attention/inputs/attention_inputs.hpp"

#include <charconv>
#include <cmath>

#include "emu/batch/format_dtype.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/error.hpp"

namespace roundscope::emu {
namespace {

class ShapeCheck {
public:
    explicit ShapeCheck(const TensorFile& f) : file_(f) {}

    const Tensor& tensor(std::string_view name) const {
        const Tensor& t = file_.get(name);
        if (!is_floating(t.dtype()))
            fail(t, "has dtype " + std::string(roundscope::name(t.dtype())) + "; attention inputs are floating point");
        return t;
    }

    // The trailing dimensions of t must be `tail`, and its leading ones those of q.
    void expect(const Tensor& t, const Shape& leading, const Shape& tail, const char* form) const {
        Shape want = leading;
        want.insert(want.end(), tail.begin(), tail.end());
        if (t.shape() != want)
            fail(t, "has shape " + shape_string(t.shape()) + " but q, k and v make it " + form + " = " +
                        shape_string(want));
    }

    [[noreturn]] void fail(const Tensor& t, const std::string& what) const {
        throw TensorError(file_.path, t.name(), what);
    }

private:
    const TensorFile& file_;
};

std::optional<bool> metadata_bool(const TensorFile& f, const char* key) {
    const auto it = f.metadata.find(key);
    if (it == f.metadata.end()) return std::nullopt;
    if (it->second == "true" || it->second == "True" || it->second == "1") return true;
    if (it->second == "false" || it->second == "False" || it->second == "0") return false;
    throw Error(f.path + ": metadata '" + key + "' is '" + printable(it->second) + "', not true or false");
}

std::optional<double> metadata_number(const TensorFile& f, const char* key) {
    const auto it = f.metadata.find(key);
    if (it == f.metadata.end()) return std::nullopt;
    double v = 0;
    const char* end = it->second.data() + it->second.size();
    const auto [ptr, ec] = std::from_chars(it->second.data(), end, v);
    if (ec != std::errc() || ptr != end || !std::isfinite(v) || v <= 0)
        throw Error(f.path + ": metadata '" + key + "' is '" + printable(it->second) + "', not a positive number");
    return v;
}

// x [.., Nq, M] with the batch dimension of q (if any), and wq [M, H * D] or [H, M, D].
void find_query_projection(const TensorFile& file, const ShapeCheck& check, AttentionInputs& in) {
    if (file.find("wq") && !file.find("x"))
        check.fail(check.tensor("wq"), "needs the layer input 'x' beside it (q = x wq)");
    if (!file.find("x")) return;
    in.x = check.tensor("x");
    const Shape& xs = in.x->shape();
    const Shape batch = in.q.shape().size() == 4 ? Shape{in.batch} : Shape{};
    in.d_model = xs.empty() ? 0 : xs.back();
    check.expect(*in.x, batch, {in.n_q, in.d_model}, "[Nq, M] or [B, Nq, M]");
    if (in.d_model == 0) check.fail(*in.x, "has no features (M = 0)");
    if (!file.find("wq")) return;
    in.w_q = check.tensor("wq");
    in.w_q_per_head = in.w_q->shape().size() == 3;
    if (in.w_q_per_head)
        check.expect(*in.w_q, {in.heads}, {in.d_model, in.d}, "[H, M, D]");
    else
        check.expect(*in.w_q, {}, {in.d_model, in.heads * in.d}, "[M, H * D] or [H, M, D]");
}

// A whole number from -1 up (a window's side; -1: unbounded).
std::optional<std::int64_t> metadata_window(const TensorFile& f, const char* key) {
    const auto it = f.metadata.find(key);
    if (it == f.metadata.end()) return std::nullopt;
    std::int64_t v = 0;
    const char* end = it->second.data() + it->second.size();
    const auto [ptr, ec] = std::from_chars(it->second.data(), end, v);
    if (ec != std::errc() || ptr != end || v < -1)
        throw Error(f.path + ": metadata '" + key + "' is '" + printable(it->second) +
                    "', not a whole number of keys from -1 (unbounded) up");
    return v;
}

// attn_mask (PyTorch's name, boolean or additive) or bias (additive), broadcast over [B, H, Nq,
// Nk]; the causal alignment and the window from the metadata.
void find_mask(const TensorFile& file, AttentionInputs& in) {
    const Tensor* mask = file.find("attn_mask");
    const Tensor* bias = file.find("bias");
    if (mask && bias)
        throw Error(file.path + ": tensors 'attn_mask' and 'bias' are both masks of the scores; give one");
    if (const Tensor* t = mask ? mask : bias) {
        if (bias && t->dtype() == DType::boolean)
            throw TensorError(file.path, t->name(),
                              "is boolean; a bias is added to the scores (a boolean mask is 'attn_mask')");
        in.mask.dense.emplace_back(*t, in.batch, in.heads, in.n_q, in.n_kv, file.path);
        in.mask.dense.back().check_values(file.path);
    }
    if (const auto it = file.metadata.find("causal_alignment"); it != file.metadata.end())
        in.mask.alignment = parse_alignment(it->second, file.path + ": metadata 'causal_alignment'");
    in.mask.window_left = metadata_window(file, "window_left").value_or(-1);
    in.mask.window_right = metadata_window(file, "window_right").value_or(-1);
}

// Metadata and tensors that would change what the kernel computed and that nothing here
// reproduces: refused rather than ignored.
void refuse_what_is_not_modelled(const TensorFile& file, const AttentionInputs& in) {
    if (const auto it = file.metadata.find("dropout_p"); it != file.metadata.end()) {
        double p = 0;
        const char* end = it->second.data() + it->second.size();
        const auto [ptr, ec] = std::from_chars(it->second.data(), end, p);
        if (ec != std::errc() || ptr != end || !(p >= 0 && p < 1))
            throw Error(file.path + ": metadata 'dropout_p' is '" + printable(it->second) +
                        "', not a number in [0, 1)");
        if (p > 0)
            throw Error(file.path + ": the kernel ran with dropout (dropout_p = " + printable(it->second) +
                        "), whose random keep mask the dump does not hold; dump with dropout_p = 0 (model.eval())");
    }
    if (const auto it = file.metadata.find("enable_gqa"); it != file.metadata.end()) {
        const std::optional<bool> gqa = metadata_bool(file, "enable_gqa");
        (void)it;
        if (!*gqa && in.kv_heads != in.heads)
            throw Error(file.path + ": k has " + std::to_string(in.kv_heads) + " heads and q " +
                        std::to_string(in.heads) + ", but the metadata says enable_gqa = false");
    }
    // roundscope.llama_dumps's record of the query heads per key-value head: k's heads agree, or k
    // and v were repeated to every query head (older dumps: the same problem, head by head)
    if (const auto it = file.metadata.find("gqa_group"); it != file.metadata.end()) {
        std::uint64_t group = 0;
        const char* end = it->second.data() + it->second.size();
        const auto [ptr, ec] = std::from_chars(it->second.data(), end, group);
        if (ec != std::errc() || ptr != end || group == 0)
            throw Error(file.path + ": metadata 'gqa_group' is '" + printable(it->second) +
                        "', not a whole number of query heads per key-value head");
        if (kv_group(in) != 1 && group != kv_group(in))
            throw Error(file.path + ": metadata 'gqa_group' is '" + printable(it->second) + "' but q's " +
                        std::to_string(in.heads) + " heads over k's " + std::to_string(kv_head_count(in)) +
                        " make groups of " + std::to_string(kv_group(in)));
        if (kv_group(in) == 1 && in.heads % group != 0)
            throw Error(file.path + ": metadata 'gqa_group' is '" + printable(it->second) +
                        "', which does not divide "
                        "q's " +
                        std::to_string(in.heads) + " heads (k and v repeated to every query head)");
    }
    // FP8 kernels' descale factors (descale_q, q_descale, ...): the stored q, k, v times them.
    for (const auto& [key, value] : file.metadata) {
        if (key.find("descale") == std::string::npos) continue;
        if (value != "1.0" && value != "1")
            throw Error(file.path + ": metadata '" + printable(key) + "' is " + printable(value) +
                        ": FP8 descale factors other than 1 are not modelled (the truth and the recipes would "
                        "read the stored values unscaled)");
    }
    for (const Tensor& t : file.tensors) {
        if (t.name().find("descale") == std::string::npos) continue;
        for (std::uint64_t i = 0; i < t.size(); ++i)
            if (!is_floating(t.dtype()) || decode(format_of(t.dtype()), t.bits_at(i)) != 1.0)
                throw TensorError(file.path, printable(t.name()),
                                  "holds an FP8 descale factor other than 1, which is not modelled (the truth and "
                                  "the recipes would read the stored values unscaled)");
    }
    const bool sdpa = file.metadata.count("source") && file.metadata.at("source").find("(sdpa)") != std::string::npos;
    if (sdpa && in.causal.value_or(false) && in.n_q != in.n_kv && !file.metadata.count("causal_alignment"))
        throw Error(file.path +
                    ": a causal scaled_dot_product_attention call with Nq != Nk aligns its mask "
                    "top-left, but the dump does not say so (metadata 'causal_alignment'): dump it "
                    "again with this version's roundscope.dump");
}

}  // namespace

AttentionInputs find_attention_inputs(const TensorFile& file) {
    const ShapeCheck check(file);
    AttentionInputs in{.q = check.tensor("q"), .k = check.tensor("k"), .v = check.tensor("v")};
    const Shape& qs = in.q.shape();
    if (qs.size() < 2 || qs.size() > 4)
        check.fail(in.q, "has shape " + shape_string(qs) + "; expected [N, D], [H, N, D] or [B, H, N, D]");
    const Shape leading(qs.begin(), qs.end() - 2);
    in.n_q = qs[qs.size() - 2];
    in.d = qs.back();
    if (leading.size() == 2) in.batch = leading[0];
    if (!leading.empty()) in.heads = leading.back();
    const Shape& ks = in.k.shape();
    if (ks.size() != qs.size()) check.fail(in.k, "has shape " + shape_string(ks) + " but q has " + shape_string(qs));
    in.n_kv = ks[ks.size() - 2];
    in.kv_heads = leading.empty() ? 1 : ks[ks.size() - 3];
    Shape kv_leading = leading;
    if (!leading.empty()) kv_leading.back() = in.kv_heads;
    check.expect(in.k, kv_leading, {in.n_kv, in.d}, "[.., Nk, D]");
    const Shape& vs = in.v.shape();
    in.d_v = vs.empty() ? 0 : vs.back();
    check.expect(in.v, kv_leading, {in.n_kv, in.d_v}, "[.., Nk, Dv]");
    // An empty axis would divide by zero in the block quantizer and give NaN or ln N elsewhere.
    for (const Tensor* t : {&in.q, &in.k, &in.v})
        for (const std::uint64_t extent : t->shape())
            if (extent == 0)
                check.fail(*t, "has shape " + shape_string(t->shape()) +
                                   ": attention needs at least one batch, head, token and feature");
    if (in.heads % in.kv_heads != 0)
        check.fail(in.k, "has shape " + shape_string(ks) + ": its " + std::to_string(in.kv_heads) +
                             " heads do not divide q's " + std::to_string(in.heads) +
                             " (grouped-query attention needs Hkv dividing H)");
    if (file.find("o")) {
        in.o = check.tensor("o");
        check.expect(*in.o, leading, {in.n_q, in.d_v}, "[.., Nq, Dv]");
    }
    if (file.find("do")) {
        in.d_o = check.tensor("do");
        check.expect(*in.d_o, leading, {in.n_q, in.d_v}, "[.., Nq, Dv]");
    }
    if (file.find("lse")) {
        in.lse = check.tensor("lse");
        check.expect(*in.lse, leading, {in.n_q}, "[.., Nq]");
    }
    find_query_projection(file, check, in);
    find_mask(file, in);
    in.causal = metadata_bool(file, "causal");
    in.softmax_scale = metadata_number(file, "softmax_scale");
    in.softcap = metadata_number(file, "softcap").value_or(0);
    refuse_what_is_not_modelled(file, in);
    return in;
}

Shape output_shape(const AttentionInputs& in, std::initializer_list<std::uint64_t> tail) {
    Shape s(in.q.shape().begin(), in.q.shape().end() - 2);
    s.insert(s.end(), tail);
    return s;
}

Shape kv_output_shape(const AttentionInputs& in, std::initializer_list<std::uint64_t> tail) {
    Shape s(in.k.shape().begin(), in.k.shape().end() - 2);
    s.insert(s.end(), tail);
    return s;
}

}  // namespace roundscope::emu
