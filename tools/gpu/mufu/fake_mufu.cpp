#include "tools/gpu/mufu/fake_mufu.hpp"

#include <array>
#include <cmath>

#include "emu/mufu/mufu_digest.hpp"
#include "lib/bits.hpp"

namespace roundscope::gpu::fake {
namespace {

constexpr std::uint32_t nan_bits = 0x7FFFFFFFu, inf_bits = 0x7F800000u, sign_bit = 0x80000000u;

// 128 segments over a 23-bit fraction: segment = f >> 16, offset d = f & 0xFFFF. A segment's
// value at d is c0 + c1 d / 2^16 + c2 d^2 / 2^32 in units of 2^-30, each product truncated
// (arithmetic shifts floor negative terms), as a fixed-point datapath would.
struct Segment {
    std::int64_t c0, c1, c2;
};
using Table = std::array<Segment, 128>;

std::int64_t fixed(double v) { return std::llround(std::ldexp(v, 30)); }

std::int64_t interpolate(const Table& t, std::uint32_t f) {
    const Segment& s = t[f >> 16];
    const std::int64_t d = f & 0xFFFF;
    return s.c0 + ((s.c1 * d) >> 16) + ((s.c2 * d * d) >> 32);
}

// Taylor coefficients of g at each segment's start, the segment 2^-7 wide.
template <class F0, class F1, class F2>
Table table(F0 g, F1 g1, F2 g2) {
    Table t{};
    for (int s = 0; s < 128; ++s) {
        const double x = s / 128.0, h = 1.0 / 128;
        t[static_cast<std::size_t>(s)] = {fixed(g(x)), fixed(g1(x) * h), fixed(g2(x) * h * h / 2)};
    }
    return t;
}

const Table& exp2_table() {
    static const Table t =
        table([](double x) { return std::exp2(x); }, [](double x) { return std::exp2(x) * std::log(2.0); },
              [](double x) { return std::exp2(x) * std::log(2.0) * std::log(2.0); });
    return t;
}
const Table& log2_table() {
    static const Table t =
        table([](double x) { return std::log2(1 + x); }, [](double x) { return 1 / ((1 + x) * std::log(2.0)); },
              [](double x) { return -1 / ((1 + x) * (1 + x) * std::log(2.0)); });
    return t;
}
const Table& rcp_table() {
    static const Table t =
        table([](double x) { return 1 / (1 + x); }, [](double x) { return -1 / ((1 + x) * (1 + x)); },
              [](double x) { return 2 / ((1 + x) * (1 + x) * (1 + x)); });
    return t;
}

bool is_nan(std::uint32_t x) { return (x & 0x7FFFFFFFu) > inf_bits; }
bool is_zero_or_subnormal(std::uint32_t x) { return (x & inf_bits) == 0; }

// 2^x, subnormal inputs and results flushed: x is taken to fixed point with 23 fraction bits
// by flooring, 2^floor applied to the table's significand (truncated to 24 bits).
std::uint32_t ex2_ftz(std::uint32_t xb) {
    if (is_nan(xb)) return nan_bits;
    if (is_zero_or_subnormal(xb)) return 0x3F800000u;
    const float x = float_from_bits(xb);
    if (x >= 128.0f) return inf_bits;
    if (x < -127.0f) return 0;
    // floor(x 2^23) in integers: x = +-m 2^(s - 23), |x| < 128.
    const std::int64_t m = (xb & 0x7FFFFF) | 0x800000, s = static_cast<std::int64_t>((xb >> 23) & 0xFF) - 127;
    std::int64_t fx = s >= 0 ? m << s : m >> std::min<std::int64_t>(-s, 40);
    if (xb & sign_bit)
        fx = s >= 0 || (m & ((std::int64_t{1} << std::min<std::int64_t>(-s, 40)) - 1)) == 0 ? -fx : -fx - 1;
    std::int64_t n = fx >> 23;
    std::int64_t significand = interpolate(exp2_table(), static_cast<std::uint32_t>(fx & 0x7FFFFF)) >> 7;
    if (significand >= (std::int64_t{1} << 24)) significand >>= 1, ++n;
    const std::int64_t exponent = n + 127;
    if (exponent <= 0) return 0;
    if (exponent >= 255) return inf_bits;
    return static_cast<std::uint32_t>(exponent << 23 | (significand & 0x7FFFFF));
}

// log2 x = e + L(m): L with 22 fraction bits, the sum rounded to nearest even into float32.
std::uint32_t lg2_ftz(std::uint32_t xb) {
    if (is_nan(xb)) return nan_bits;
    if (is_zero_or_subnormal(xb)) return 0xFF800000u;
    if (xb & sign_bit) return nan_bits;
    if (xb == inf_bits) return inf_bits;
    const std::int64_t e = static_cast<std::int64_t>(xb >> 23) - 127;
    const std::int64_t l = interpolate(log2_table(), xb & 0x7FFFFF) >> 8;
    return bits_of(static_cast<float>(e * (std::int64_t{1} << 22) + l) * 0x1p-22f);
}

// 1/x = 2^-e R(m): R's significand truncated to 24 bits.
std::uint32_t rcp_ftz(std::uint32_t xb) {
    const std::uint32_t sign = xb & sign_bit;
    if (is_nan(xb)) return nan_bits;
    if (is_zero_or_subnormal(xb)) return sign | inf_bits;
    if ((xb & 0x7FFFFFFFu) == inf_bits) return sign;
    const std::int64_t e = static_cast<std::int64_t>((xb >> 23) & 0xFF) - 127;
    const std::int64_t r = interpolate(rcp_table(), xb & 0x7FFFFF) << 1;  // units of 2^-31
    const bool one = r >= (std::int64_t{1} << 31);
    const std::int64_t exponent = (one ? 127 : 126) - e;
    if (exponent <= 0) return sign;
    const std::int64_t significand = one ? 0 : (r >> 7) & 0x7FFFFF;
    return sign | static_cast<std::uint32_t>(exponent << 23 | significand);
}

// The non-ftz guard: halve below -126, square the result.
std::uint32_t ex2(std::uint32_t x) {
    const float f = float_from_bits(x);
    if (!(f < -126.0f)) return ex2_ftz(x);
    const float half = float_from_bits(ex2_ftz(bits_of(f * 0.5f)));
    return bits_of(half * half);
}

// The non-ftz guard: scale subnormals by 2^24, subtract 24.
std::uint32_t lg2(std::uint32_t x) {
    if (!is_zero_or_subnormal(x) || (x & 0x7FFFFFFFu) == 0) return lg2_ftz(x);
    if (x & sign_bit) return nan_bits;
    return bits_of(float_from_bits(lg2_ftz(bits_of(float_from_bits(x) * 0x1p24f))) - 24.0f);
}

// Calls f with the variant's function as a lambda, so that loops over 2^32 inputs inline it.
template <class F>
auto with_variant(MufuVariant v, const F& f) {
    switch (v) {
        case MufuVariant::ex2_ftz:
            return f([](std::uint32_t x) { return ex2_ftz(x); });
        case MufuVariant::ex2:
            return f([](std::uint32_t x) { return ex2(x); });
        case MufuVariant::lg2_ftz:
            return f([](std::uint32_t x) { return lg2_ftz(x); });
        case MufuVariant::lg2:
            return f([](std::uint32_t x) { return lg2(x); });
        case MufuVariant::rcp_ftz:
            break;
    }
    return f([](std::uint32_t x) { return rcp_ftz(x); });
}

}  // namespace

std::uint32_t evaluate(MufuVariant v, std::uint32_t x) {
    return with_variant(v, [x](const auto& unit) { return unit(x); });
}

std::vector<std::uint64_t> digests(MufuVariant v, int threads) {
    return with_variant(v, [threads](const auto& unit) { return emu::digests_of(unit, threads); });
}

std::vector<std::uint32_t> outputs(MufuVariant v, std::uint32_t first, std::uint32_t count) {
    std::vector<std::uint32_t> out(count);
    for (std::uint32_t i = 0; i < count; ++i) out[i] = evaluate(v, first + i);
    return out;
}

}  // namespace roundscope::gpu::fake
