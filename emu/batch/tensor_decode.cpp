#include "emu/batch/tensor_decode.hpp"

#include <cstring>
#include <string>
#include <type_traits>

#include "emu/batch/batch_cast.hpp"
#include "lib/error.hpp"
#include "lib/parallel.hpp"

namespace roundscope::emu {
namespace {

// Elements are copied through an aligned block: tensor data in a file need not be aligned.
constexpr std::size_t block = 2048;

template <class Stored, class Real>
void convert_block(const std::byte* src, std::span<Real> out) {
    if constexpr (std::is_same_v<Stored, Real>) {  // float into float, double into double: one copy
        std::memcpy(out.data(), src, out.size() * sizeof(Real));
        return;
    }
    Stored items[block];
    std::memcpy(items, src, out.size() * sizeof(Stored));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<Real>(items[i]);
}

template <class Real>
void convert_bool_block(const std::byte* src, std::span<Real> out) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = src[i] != std::byte{0} ? Real(1) : Real(0);
}

template <class Bits, class Real>
void decode_block(const Format& f, const std::byte* src, std::span<Real> out) {
    Bits items[block];
    std::memcpy(items, src, out.size() * sizeof(Bits));
    decode_batch<Bits, Real>(f, std::span<const Bits>(items, out.size()), out, 1);
}

template <class Real>
void decode_one_block(const Tensor& t, const std::byte* src, std::span<Real> out) {
    switch (t.dtype()) {
        case DType::boolean:
            return convert_bool_block(src, out);
        case DType::u8:
            return convert_block<std::uint8_t>(src, out);
        case DType::i8:
            return convert_block<std::int8_t>(src, out);
        case DType::u16:
            return convert_block<std::uint16_t>(src, out);
        case DType::i16:
            return convert_block<std::int16_t>(src, out);
        case DType::u32:
            return convert_block<std::uint32_t>(src, out);
        case DType::i32:
            return convert_block<std::int32_t>(src, out);
        case DType::u64:
            return convert_block<std::uint64_t>(src, out);
        case DType::i64:
            return convert_block<std::int64_t>(src, out);
        case DType::f32:
            return convert_block<float>(src, out);
        case DType::f64:
            return convert_block<double>(src, out);
        default:
            break;
    }
    const Format& f = format_of(t.dtype());
    if (storage_bytes(f) == 1) return decode_block<std::uint8_t>(f, src, out);
    return decode_block<std::uint16_t>(f, src, out);
}

}  // namespace

Unpacked unpack_element(const Tensor& t, std::uint64_t i) {
    const std::uint64_t bits = t.bits_at(i);
    const DTypeInfo& d = info(t.dtype());
    if (d.kind == DTypeKind::floating) return unpack(format_of(t.dtype()), bits);
    Unpacked u;
    std::uint64_t magnitude = d.kind == DTypeKind::boolean ? (bits != 0) : bits;
    if (d.kind == DTypeKind::signed_integer) {
        const int shift = 64 - 8 * d.storage_bytes;
        const std::int64_t v = static_cast<std::int64_t>(bits << shift) >> shift;
        u.negative = v < 0;
        magnitude = u.negative ? ~static_cast<std::uint64_t>(v) + 1 : static_cast<std::uint64_t>(v);
    }
    u.cls = magnitude == 0 ? ValueClass::zero : ValueClass::finite;
    u.m = magnitude;
    return u;
}

template <class Real>
void decode_elements(const Tensor& t, std::uint64_t first, std::span<Real> out) {
    if (first > t.size() || out.size() > t.size() - first)
        throw Error("tensor '" + t.name() + "': elements past its end requested");
    const int unit = info(t.dtype()).storage_bytes;
    const std::byte* src = t.bytes().data() + first * unit;
    for (std::size_t i = 0; i < out.size(); i += block) {
        const std::size_t n = std::min(block, out.size() - i);
        decode_one_block<Real>(t, src + i * unit, out.subspan(i, n));
    }
}

template <class Real>
std::vector<Real> decode_tensor(const Tensor& t, int threads) {
    std::vector<Real> out(t.size());
    parallel_for(out.size(), std::size_t{1} << 16, threads, [&](std::size_t begin, std::size_t end) {
        decode_elements<Real>(t, begin, std::span<Real>(out).subspan(begin, end - begin));
    });
    return out;
}

template void decode_elements<float>(const Tensor&, std::uint64_t, std::span<float>);
template void decode_elements<double>(const Tensor&, std::uint64_t, std::span<double>);
template std::vector<float> decode_tensor<float>(const Tensor&, int);
template std::vector<double> decode_tensor<double>(const Tensor&, int);

}  // namespace roundscope::emu
