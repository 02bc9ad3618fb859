#include "emu/batch/tensor_cast.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "emu/batch/batch_cast.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "emu/numbers/round.hpp"
#include "emu/numbers/scaled_value.hpp"
#include "lib/error.hpp"
#include "lib/parallel.hpp"

namespace roundscope::emu {
namespace {

constexpr std::size_t grain = std::size_t{1} << 16;

template <class Bits>
void store(std::span<std::byte> out, std::uint64_t i, std::uint64_t bits) {
    const Bits b = static_cast<Bits>(bits);
    std::memcpy(out.data() + i * sizeof(Bits), &b, sizeof(Bits));
}

/// Elements [begin, end) of a float32 or float64 tensor through the batch cast, from the tensor's
/// bytes into `out`'s (a copy only where a file placed them misaligned).
template <class Real, class Bits>
void batch_cast_range(const Tensor& t, std::size_t begin, std::size_t end, const Format& to, const CastOptions& options,
                      std::span<std::byte> out) {
    const std::size_t n = end - begin;
    const std::byte* source = t.bytes().data() + begin * sizeof(Real);
    const std::span<Bits> bits(reinterpret_cast<Bits*>(out.data() + begin * sizeof(Bits)), n);
    const BatchSpec spec{begin, 1};
    if (reinterpret_cast<std::uintptr_t>(source) % alignof(Real) == 0) {
        cast_batch<Real, Bits>({reinterpret_cast<const Real*>(source), n}, to, options, bits, spec);
        return;
    }
    std::vector<Real> aligned(n);
    std::memcpy(aligned.data(), source, n * sizeof(Real));
    cast_batch<Real, Bits>(aligned, to, options, bits, spec);
}

template <class Real>
void batch_cast_range(const Tensor& t, std::size_t begin, std::size_t end, const Format& to, const CastOptions& options,
                      std::span<std::byte> out, int unit) {
    switch (unit) {
        case 1:
            return batch_cast_range<Real, std::uint8_t>(t, begin, end, to, options, out);
        case 2:
            return batch_cast_range<Real, std::uint16_t>(t, begin, end, to, options, out);
        case 4:
            return batch_cast_range<Real, std::uint32_t>(t, begin, end, to, options, out);
        default:
            return batch_cast_range<Real, std::uint64_t>(t, begin, end, to, options, out);
    }
}

// Elements [begin, end) of a float tensor of 16 bits or fewer through the batch cast: widened to
// float32 exactly, block by block. The value, not the source format, decides a rounding, so only
// NaNs (whose payload may carry into the result) take the element path.
template <class Bits>
void widened_cast_range(const Tensor& t, std::size_t begin, std::size_t end, const Format& to,
                        const CastOptions& options, std::span<std::byte> out) {
    constexpr std::size_t block = 2048;
    float values[block];
    Bits bits[block];
    for (std::size_t first = begin; first < end; first += block) {
        const std::size_t n = std::min(block, end - first);
        decode_elements<float>(t, first, std::span<float>(values, n));
        cast_batch<float, Bits>({values, n}, to, options, {bits, n}, BatchSpec{first, 1});
        for (std::size_t i = 0; i < n; ++i)
            if (std::isnan(values[i]))
                bits[i] = static_cast<Bits>(round_to_format(to, unpack_element(t, first + i), options, first + i));
        std::memcpy(out.data() + first * sizeof(Bits), bits, n * sizeof(Bits));
    }
}

bool widens_to_float(DType d) {
    const DTypeInfo& i = info(d);
    return i.kind == DTypeKind::floating && i.storage_bytes <= 2;
}

}  // namespace

Tensor cast_tensor(const Tensor& t, const Format& to, const CastOptions& options, double scale, int threads) {
    const DType out_dtype = dtype_of(to);
    std::vector<std::byte> out(t.size() * static_cast<std::size_t>(info(out_dtype).storage_bytes));
    cast_tensor_into(t, to, options, out, scale, threads);
    return Tensor(t.name(), out_dtype, t.shape(), std::move(out));
}

void cast_tensor_into(const Tensor& t, const Format& to, const CastOptions& options, std::span<std::byte> out,
                      double scale, int threads) {
    if (!std::isfinite(scale)) throw Error(fmt::format("scale must be finite, not {}", scale));
    const int unit = info(dtype_of(to)).storage_bytes;
    if (out.size() != t.size() * static_cast<std::size_t>(unit))
        throw Error("tensor '" + t.name() + "': the output holds " + std::to_string(out.size()) + " bytes, not the " +
                    std::to_string(t.size() * static_cast<std::size_t>(unit)) + " of " + std::to_string(t.size()) +
                    " " + std::string(to.name) + " elements");
    const Unpacked s = unpack(f64, bits_of(scale));
    const bool unscaled = scale == 1.0;
    parallel_for(t.size(), grain, threads, [&](std::size_t begin, std::size_t end) {
        // float32 and float64 sources take the SIMD batch cast when no scale applies.
        if (unscaled && t.dtype() == DType::f32) return batch_cast_range<float>(t, begin, end, to, options, out, unit);
        if (unscaled && t.dtype() == DType::f64) return batch_cast_range<double>(t, begin, end, to, options, out, unit);
        // DAZ reads the source format's subnormals as zero: not float32's, so not widened.
        if (unscaled && !options.flush_input && widens_to_float(t.dtype())) {
            if (unit == 1) return widened_cast_range<std::uint8_t>(t, begin, end, to, options, out);
            if (unit == 2) return widened_cast_range<std::uint16_t>(t, begin, end, to, options, out);
            if (unit == 4) return widened_cast_range<std::uint32_t>(t, begin, end, to, options, out);
        }
        for (std::size_t i = begin; i < end; ++i) {
            const Unpacked x = unscaled ? unpack_element(t, i) : scaled(unpack_element(t, i), s);
            const std::uint64_t bits = round_to_format(to, x, options, i);
            switch (unit) {
                case 1:
                    store<std::uint8_t>(out, i, bits);
                    break;
                case 2:
                    store<std::uint16_t>(out, i, bits);
                    break;
                case 4:
                    store<std::uint32_t>(out, i, bits);
                    break;
                default:
                    store<std::uint64_t>(out, i, bits);
                    break;
            }
        }
    });
}

}  // namespace roundscope::emu
