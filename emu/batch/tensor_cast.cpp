#include "emu/batch/tensor_cast.hpp"

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
void store(std::vector<std::byte>& out, std::uint64_t i, std::uint64_t bits) {
    const Bits b = static_cast<Bits>(bits);
    std::memcpy(out.data() + i * sizeof(Bits), &b, sizeof(Bits));
}

}  // namespace

DType dtype_of(const Format& f) {
    if (const auto t = find_dtype(f.name)) return *t;
    throw Error("format " + std::string(f.name) + " has no dtype");
}

Tensor cast_tensor(const Tensor& t, const Format& to, const CastOptions& options, double scale, int threads) {
    if (!std::isfinite(scale)) throw Error("--scale must be finite");
    const DType out_dtype = dtype_of(to);
    const int unit = info(out_dtype).storage_bytes;
    std::vector<std::byte> out(t.size() * unit);
    const Unpacked s = unpack(f64, bits_of(scale));
    const bool unscaled = scale == 1.0;
    parallel_for(t.size(), grain, threads, [&](std::size_t begin, std::size_t end) {
        // float32 and float64 sources take the SIMD batch cast when no scale applies.
        if (unscaled && (t.dtype() == DType::f32 || t.dtype() == DType::f64)) {
            std::vector<double> x(end - begin);
            decode_elements<double>(t, begin, x);
            const BatchSpec spec{begin, 1};
            auto cast_into = [&](auto bits_type) {
                using Bits = decltype(bits_type);
                std::vector<Bits> bits(x.size());
                if (t.dtype() == DType::f32) {
                    std::vector<float> f(x.begin(), x.end());  // exact: x came from float
                    cast_batch<float, Bits>(f, to, options, bits, spec);
                } else {
                    cast_batch<double, Bits>(x, to, options, bits, spec);
                }
                std::memcpy(out.data() + begin * unit, bits.data(), bits.size() * unit);
            };
            switch (unit) {
                case 1:
                    cast_into(std::uint8_t{});
                    break;
                case 2:
                    cast_into(std::uint16_t{});
                    break;
                case 4:
                    cast_into(std::uint32_t{});
                    break;
                default:
                    cast_into(std::uint64_t{});
                    break;
            }
            return;
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
    return Tensor(t.name(), out_dtype, t.shape(), std::move(out));
}

}  // namespace roundscope::emu
