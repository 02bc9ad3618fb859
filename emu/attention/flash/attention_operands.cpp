#include "emu/attention/flash/attention_operands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "emu/batch/format_dtype.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "lib/dtype.hpp"
#include "lib/error.hpp"

namespace roundscope::emu {
namespace {

// Which of the 2^bits encodings of a float dtype of 8 or 16 bits are NaN or Inf, decoded once.
const std::vector<char>& nonfinite_encodings(DType d) {
    static std::mutex mutex;
    static std::map<DType, std::vector<char>> tables;
    const std::lock_guard<std::mutex> lock(mutex);
    std::vector<char>& table = tables[d];
    if (table.empty()) {
        const Format& f = format_of(d);
        table.resize(std::size_t{1} << (8 * info(d).storage_bytes));
        for (std::size_t bits = 0; bits < table.size(); ++bits) table[bits] = !std::isfinite(decode(f, bits));
    }
    return table;
}

// The first element of t that is NaN or Inf, or t.size(): by its encoding for floats of 8, 16
// and 32 bits (each encoding decoded once, or float32's own test), else through the batch
// decoder (exact).
std::uint64_t first_nonfinite(const Tensor& t) {
    const DTypeInfo& i = info(t.dtype());
    const std::byte* at = t.bytes().data();
    if (i.kind == DTypeKind::floating && (i.storage_bytes == 1 || i.storage_bytes == 2)) {
        const std::vector<char>& bad = nonfinite_encodings(t.dtype());
        auto scan = [&]<class Unit>(Unit) {
            for (std::uint64_t e = 0; e < t.size(); ++e) {
                Unit u;
                std::memcpy(&u, at + e * sizeof(Unit), sizeof(Unit));
                if (bad[u]) return e;
            }
            return t.size();
        };
        return i.storage_bytes == 1 ? scan(std::uint8_t{}) : scan(std::uint16_t{});
    }
    if (t.dtype() == DType::f32) {
        for (std::uint64_t e = 0; e < t.size(); ++e) {
            float x;
            std::memcpy(&x, at + 4 * e, 4);
            if (!std::isfinite(x)) return e;
        }
        return t.size();
    }
    const std::vector<double> values = decode_tensor<double>(t);
    return static_cast<std::uint64_t>(
        std::find_if(values.begin(), values.end(), [](double x) { return !std::isfinite(x); }) - values.begin());
}

// The elements' storage units as bits (one unit of 1, 2 or 4 bytes an element here).
std::vector<std::uint32_t> storage_bits(const Tensor& t) {
    std::vector<std::uint32_t> bits(t.size());
    const std::byte* at = t.bytes().data();
    auto widen = [&]<class Unit>(Unit) {
        for (std::uint64_t i = 0; i < bits.size(); ++i) {
            Unit u;
            std::memcpy(&u, at + i * sizeof(Unit), sizeof(Unit));
            bits[i] = u;
        }
    };
    switch (info(t.dtype()).storage_bytes) {
        case 1:
            widen(std::uint8_t{});
            break;
        case 2:
            widen(std::uint16_t{});
            break;
        case 4:
            widen(std::uint32_t{});
            break;
        default:
            for (std::uint64_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint32_t>(t.bits_at(i));
    }
    return bits;
}

std::vector<std::uint32_t> operand(const Tensor& t, const Format& input) {
    const Format& from = format_of(t.dtype());
    if (const std::uint64_t i = first_nonfinite(t); i < t.size())
        throw TensorError("", t.name(),
                          fmt::format("holds NaN or Inf (element {}); attention of it is meaningless", i));
    // A finite value rounded into its own format is itself: the elements are the operand.
    if (from == input && dtype_of(input) == t.dtype()) return storage_bits(t);
    const Tensor cast = cast_tensor(t, input, CastOptions{});
    if (const std::uint64_t i = first_nonfinite(cast); i < cast.size())
        throw TensorError("", t.name(),
                          fmt::format("element {} ({:g}) overflows the recipe's input format {} (largest {:g})", i,
                                      decode(from, t.bits_at(i)), input.name, decode(input, max_finite_bits(input))));
    return storage_bits(cast);
}

}  // namespace

AttentionShape attention_shape_of(const AttentionInputs& in, bool causal, double scale) {
    AttentionShape s;
    s.heads = in.batch * in.heads, s.n_q = in.n_q, s.n_kv = in.n_kv, s.d = in.d, s.d_v = in.d_v;
    s.launch_heads = in.launch_heads;
    s.causal = causal;
    s.scale_given = scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(in.d));
    s.scale = static_cast<float>(s.scale_given);
    s.query_rows = in.query_rows, s.query_rows_of = in.query_rows_of;
    s.kv_group = kv_group(in);
    if (!in.mask.prefix_only()) s.mask = std::make_shared<const ScoreMask>(in.mask);
    s.softcap = in.softcap;
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
