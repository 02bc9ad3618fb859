#include "emu/attention/attention_inputs.hpp"

#include <charconv>
#include <cmath>

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
        throw Error(file_.path + ": tensor '" + t.name() + "' " + what);
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
    const Shape& ks = in.k.shape();
    if (ks.size() != qs.size()) check.fail(in.k, "has shape " + shape_string(ks) + " but q has " + shape_string(qs));
    in.n_kv = ks[ks.size() - 2];
    check.expect(in.k, leading, {in.n_kv, in.d}, "[.., Nk, D]");
    const Shape& vs = in.v.shape();
    in.d_v = vs.empty() ? 0 : vs.back();
    check.expect(in.v, leading, {in.n_kv, in.d_v}, "[.., Nk, Dv]");
    // An empty axis would divide by zero in the block quantizer and give NaN or ln N elsewhere.
    for (const Tensor* t : {&in.q, &in.k, &in.v})
        for (const std::uint64_t extent : t->shape())
            if (extent == 0)
                check.fail(*t, "has shape " + shape_string(t->shape()) +
                                   ": attention needs at least one batch, head, token and feature");
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
    if (file.find("bias")) {
        in.bias = check.tensor("bias");
        in.bias_per_head = in.bias->shape().size() == qs.size();
        check.expect(*in.bias, in.bias_per_head ? leading : Shape{}, {in.n_q, in.n_kv},
                     in.bias_per_head ? "[.., Nq, Nk]" : "[Nq, Nk] or [.., Nq, Nk]");
    }
    if (leading.size() == 2) in.batch = leading[0];
    if (!leading.empty()) in.heads = leading.back();
    find_query_projection(file, check, in);
    in.causal = metadata_bool(file, "causal");
    in.softmax_scale = metadata_number(file, "softmax_scale");
    return in;
}

Shape output_shape(const AttentionInputs& in, std::initializer_list<std::uint64_t> tail) {
    Shape s(in.q.shape().begin(), in.q.shape().end() - 2);
    s.insert(s.end(), tail);
    return s;
}

}  // namespace roundscope::emu
