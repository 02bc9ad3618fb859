#include "emu/attention/inputs/head_inputs.hpp"

#include <cstring>

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
    one.launch_heads = in.launch_heads != 0 ? in.launch_heads : head_count(in);
    one.batch = 1, one.heads = 1;
    one.q = slice(in.q, head, {in.n_q, in.d});
    one.kv_heads = 1;
    const std::uint64_t kv = head / kv_group(in);  // heads of a group are neighbours, as PyTorch's enable_gqa
    one.k = slice(in.k, kv, {in.n_kv, in.d});
    one.v = slice(in.v, kv, {in.n_kv, in.d_v});
    one.mask = in.mask.heads(head, 1);
    if (in.o) one.o = slice(*in.o, head, {in.n_q, in.d_v});
    if (in.d_o) one.d_o = slice(*in.d_o, head, {in.n_q, in.d_v});
    if (in.lse) one.lse = slice(*in.lse, head, {in.n_q});
    if (in.x) one.x = slice(*in.x, in.x->shape().size() == 3 ? head / in.heads : 0, {in.n_q, in.d_model});
    if (in.w_q) {
        const std::uint64_t h = head % in.heads;
        one.w_q =
            in.w_q_per_head ? slice(*in.w_q, h, {in.d_model, in.d}) : query_weight_columns(*in.w_q, h, in.heads, in.d);
        one.w_q_per_head = false;
    }
    return one;
}

AttentionInputs group_inputs(const AttentionInputs& in, std::uint64_t kv_head) {
    const std::uint64_t g = kv_group(in);
    if (kv_head >= in.batch * kv_head_count(in))
        throw Error("key-value head " + std::to_string(kv_head) + " of " +
                    std::to_string(in.batch * kv_head_count(in)) + ": no such head");
    const std::uint64_t first = kv_head * g;
    AttentionInputs group = in;
    group.launch_heads = in.launch_heads != 0 ? in.launch_heads : head_count(in);
    group.batch = 1, group.heads = g, group.kv_heads = 1;
    auto heads_of = [&](const Tensor& t, std::uint64_t from, std::uint64_t count, const Shape& tail) {
        std::uint64_t elements = count;
        for (const std::uint64_t n : tail) elements *= n;
        const auto unit = static_cast<std::uint64_t>(info(t.dtype()).storage_bytes);
        Shape shape{count};
        shape.insert(shape.end(), tail.begin(), tail.end());
        return Tensor::view(t.name(), t.dtype(), shape,
                            t.bytes().subspan(from * (elements / count) * unit, elements * unit),
                            std::make_shared<Tensor>(t));
    };
    group.q = heads_of(in.q, first, g, {in.n_q, in.d});
    group.k = heads_of(in.k, kv_head, 1, {in.n_kv, in.d});
    group.v = heads_of(in.v, kv_head, 1, {in.n_kv, in.d_v});
    if (in.o) group.o = heads_of(*in.o, first, g, {in.n_q, in.d_v});
    if (in.d_o) group.d_o = heads_of(*in.d_o, first, g, {in.n_q, in.d_v});
    if (in.lse) group.lse = heads_of(*in.lse, first, g, {in.n_q});
    group.mask = in.mask.heads(first, g);
    if (in.x) group.x = slice(*in.x, in.x->shape().size() == 3 ? first / in.heads : 0, {in.n_q, in.d_model});
    group.w_q.reset(), group.w_q_per_head = false;  // the query weight is a per-head analysis's
    return group;
}

AttentionInputs kv_per_query_head(const AttentionInputs& in) {
    const std::uint64_t g = kv_group(in);
    if (g == 1) return in;
    auto repeated = [&](const Tensor& t, std::uint64_t rows, std::uint64_t cols) {
        const auto unit = static_cast<std::uint64_t>(info(t.dtype()).storage_bytes);
        const std::uint64_t head_bytes = rows * cols * unit;
        Shape shape = t.shape();
        shape[shape.size() - 3] = in.heads;
        std::vector<std::byte> bytes(in.batch * in.heads * head_bytes);
        for (std::uint64_t h = 0; h < in.batch * in.heads; ++h)
            std::memcpy(bytes.data() + h * head_bytes, t.bytes().data() + h / g * head_bytes, head_bytes);
        return Tensor(t.name(), t.dtype(), std::move(shape), std::move(bytes));
    };
    AttentionInputs out = in;
    out.k = repeated(in.k, in.n_kv, in.d);
    out.v = repeated(in.v, in.n_kv, in.d_v);
    out.kv_heads = in.heads;
    return out;
}

}  // namespace roundscope::emu
