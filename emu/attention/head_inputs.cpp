#include "emu/attention/head_inputs.hpp"

#include "lib/error.hpp"

namespace roundscope::emu {
namespace {

// Slice `index` of the leading dimensions of t, whose last dimensions are `tail`: a view.
Tensor slice(const Tensor& t, std::uint64_t index, const Shape& tail) {
    std::uint64_t elements = 1;
    for (const std::uint64_t n : tail) elements *= n;
    const auto unit = static_cast<std::uint64_t>(info(t.dtype()).storage_bytes);
    const std::span<const std::byte> bytes = t.bytes().subspan(index * elements * unit, elements * unit);
    return Tensor::view(t.name(), t.dtype(), tail, bytes, std::make_shared<Tensor>(t));
}

// The D columns of head h of wq [M, H * D]: a copy (the columns are strided).
Tensor query_weight_columns(const Tensor& w, std::uint64_t h, std::uint64_t heads, std::uint64_t d) {
    const std::uint64_t m = w.shape()[0];
    Tensor out = Tensor::zeros(w.name(), w.dtype(), {m, d});
    for (std::uint64_t r = 0; r < m; ++r)
        for (std::uint64_t c = 0; c < d; ++c) out.set_bits_at(r * d + c, w.bits_at(r * heads * d + h * d + c));
    return out;
}

}  // namespace

AttentionInputs head_inputs(const AttentionInputs& in, std::uint64_t head) {
    if (head >= head_count(in))
        throw Error("head " + std::to_string(head) + " of " + std::to_string(head_count(in)) + ": no such head");
    AttentionInputs one = in;
    one.batch = 1, one.heads = 1;
    one.q = slice(in.q, head, {in.n_q, in.d});
    one.k = slice(in.k, head, {in.n_kv, in.d});
    one.v = slice(in.v, head, {in.n_kv, in.d_v});
    if (in.o) one.o = slice(*in.o, head, {in.n_q, in.d_v});
    if (in.d_o) one.d_o = slice(*in.d_o, head, {in.n_q, in.d_v});
    if (in.lse) one.lse = slice(*in.lse, head, {in.n_q});
    if (in.bias && in.bias_per_head) one.bias = slice(*in.bias, head, {in.n_q, in.n_kv});
    if (in.x) one.x = slice(*in.x, in.x->shape().size() == 3 ? head / in.heads : 0, {in.n_q, in.d_model});
    if (in.w_q) {
        const std::uint64_t h = head % in.heads;
        one.w_q =
            in.w_q_per_head ? slice(*in.w_q, h, {in.d_model, in.d}) : query_weight_columns(*in.w_q, h, in.heads, in.d);
        one.w_q_per_head = false;
    }
    return one;
}

}  // namespace roundscope::emu
