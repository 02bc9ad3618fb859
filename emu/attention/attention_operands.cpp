#include "emu/attention/attention_operands.hpp"

#include <fmt/format.h>

#include <cmath>

#include "emu/batch/tensor_cast.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "lib/error.hpp"

namespace roundscope::emu {
namespace {

std::vector<std::uint32_t> operand(const Tensor& t, const Format& input) {
    const Format& from = format_of(t.dtype());
    for (std::uint64_t i = 0; i < t.size(); ++i) {
        const Unpacked x = unpack(from, t.bits_at(i));
        if (x.cls == ValueClass::nan || x.cls == ValueClass::inf)
            throw Error(
                fmt::format("tensor '{}' holds NaN or Inf (element {}); attention of it is meaningless", t.name(), i));
    }
    const Tensor cast = cast_tensor(t, input, CastOptions{});
    std::vector<std::uint32_t> bits(cast.size());
    for (std::uint64_t i = 0; i < bits.size(); ++i) {
        bits[i] = static_cast<std::uint32_t>(cast.bits_at(i));
        const ValueClass c = unpack(input, bits[i]).cls;
        if (c == ValueClass::nan || c == ValueClass::inf)
            throw Error(fmt::format(
                "tensor '{}' element {} ({:g}) overflows the recipe's input format {} (largest {:g})", t.name(), i,
                decode(from, t.bits_at(i)), input.name, decode(input, max_finite_bits(input))));
    }
    return bits;
}

}  // namespace

AttentionShape attention_shape_of(const AttentionInputs& in, bool causal, double scale) {
    AttentionShape s;
    s.heads = in.batch * in.heads, s.n_q = in.n_q, s.n_kv = in.n_kv, s.d = in.d, s.d_v = in.d_v;
    s.causal = causal;
    s.scale = static_cast<float>(scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(in.d)));
    return s;
}

AttentionOperands attention_operands(const AttentionInputs& in, const Format& input, bool with_d_o) {
    AttentionOperands out;
    out.q = operand(in.q, input), out.k = operand(in.k, input), out.v = operand(in.v, input);
    if (with_d_o) {
        if (!in.d_o) throw Error("the backward pass needs a tensor 'do' (dO)");
        out.d_o = operand(*in.d_o, input);
    }
    return out;
}

}  // namespace roundscope::emu
