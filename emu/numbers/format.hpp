#pragma once
// Number formats: one descriptor each, plus the quantities every algorithm derives from it.
// A format is data; the cast and decode algorithms (round.hpp, unpack.hpp) are written once
// for all of them. Adding a format means adding one descriptor to `all_formats` below.
#include <cstdint>
#include <span>
#include <string_view>

#include "lib/host_device.hpp"

namespace roundscope::emu {

/// How a format spends its bit patterns on special values.
enum class Encoding : std::uint8_t {
    ieee,    // exponent all ones: Inf (mantissa 0) or NaN (mantissa != 0): f64 f32 f16 bf16 e5m2
    fn,      // "finite, NaN": no Inf; only S.1..1.1..1 is NaN (OCP E4M3, NVFP4's UE4M3)
    fnuz,    // "finite, NaN, unsigned zero": no Inf, no -0; 0x80 is the one NaN (AMD/Graphcore FP8)
    finite,  // every pattern is a finite number: OCP FP6 E2M3 / E3M2 and FP4 E2M1
    e8m0,    // unsigned exponent only, 2^(e-127); 0xFF is NaN; no zero (OCP MX scale)
    int8,    // two's complement integer q with an implicit scale 2^-man_bits (OCP MXINT8 element)
};

struct Format {
    std::string_view name;
    int bits;      // storage width
    int exp_bits;  // exponent field width
    int man_bits;  // stored fraction bits (for int8: the implicit scale 2^-man_bits)
    int bias;      // exponent bias
    Encoding encoding;
    bool is_signed;  // has a sign bit (the top bit of `bits`)

    friend constexpr bool operator==(const Format& a, const Format& b) { return a.name == b.name; }
};

// Encodings: one short block per format, the way the specs state them.
// IEEE 754 binary64/32/16.
inline constexpr Format f64{"f64", 64, 11, 52, 1023, Encoding::ieee, true};
inline constexpr Format f32{"f32", 32, 8, 23, 127, Encoding::ieee, true};
inline constexpr Format f16{"f16", 16, 5, 10, 15, Encoding::ieee, true};
/// bfloat16: float32's exponent, 7 fraction bits.
inline constexpr Format bf16{"bf16", 16, 8, 7, 127, Encoding::ieee, true};
/// OCP 8-bit FP v1.0 E4M3 ("float8_e4m3fn"): no Inf, NaN = S.1111.111, max 448.
inline constexpr Format e4m3{"e4m3", 8, 4, 3, 7, Encoding::fn, true};
/// OCP 8-bit FP v1.0 E5M2: IEEE-like, Inf and NaN, max 57344.
inline constexpr Format e5m2{"e5m2", 8, 5, 2, 15, Encoding::ieee, true};
/// OCP MX v1.0 FP6 E2M3: no Inf/NaN, max 7.5.
inline constexpr Format e2m3{"e2m3", 6, 2, 3, 1, Encoding::finite, true};
/// OCP MX v1.0 FP6 E3M2: no Inf/NaN, max 28.
inline constexpr Format e3m2{"e3m2", 6, 3, 2, 3, Encoding::finite, true};
/// OCP MX v1.0 FP4 E2M1: no Inf/NaN, values 0, 0.5, 1, 1.5, 2, 3, 4, 6.
inline constexpr Format e2m1{"e2m1", 4, 2, 1, 1, Encoding::finite, true};
/// OCP MX v1.0 E8M0 scale: 2^(e-127) for e in 0..254, 0xFF = NaN; no sign, no zero.
inline constexpr Format e8m0{"e8m0", 8, 8, 0, 127, Encoding::e8m0, false};
/// NVFP4 block scale UE4M3: E4M3 without the sign bit (bit 7 is 0), max 448, 0x7F = NaN.
inline constexpr Format ue4m3{"ue4m3", 8, 4, 3, 7, Encoding::fn, false};
/// OCP MX v1.0 MXINT8 element: two's complement q, value q * 2^-6, in [-2, 1.984375].
inline constexpr Format int8{"int8", 8, 0, 6, 0, Encoding::int8, true};
/// FP8 "fnuz" variants (Graphcore/AMD): bias one larger than OCP, 0x80 is NaN, no -0, no Inf.
inline constexpr Format e4m3fnuz{"e4m3fnuz", 8, 4, 3, 8, Encoding::fnuz, true};
inline constexpr Format e5m2fnuz{"e5m2fnuz", 8, 5, 2, 16, Encoding::fnuz, true};

inline constexpr Format all_formats[] = {f64,  f32,  f16,  bf16,  e4m3, e5m2,     e2m3,
                                         e3m2, e2m1, e8m0, ue4m3, int8, e4m3fnuz, e5m2fnuz};

// ---- Derived quantities -------------------------------------------------------------------

ROUNDSCOPE_HD constexpr bool has_inf(const Format& f) { return f.encoding == Encoding::ieee; }
ROUNDSCOPE_HD constexpr bool has_nan(const Format& f) {
    return f.encoding != Encoding::finite && f.encoding != Encoding::int8;
}
/// Can the format encode -0?
ROUNDSCOPE_HD constexpr bool has_negative_zero(const Format& f) {
    return f.is_signed && f.encoding != Encoding::fnuz && f.encoding != Encoding::int8;
}
ROUNDSCOPE_HD constexpr std::uint64_t sign_mask(const Format& f) {
    return f.is_signed ? std::uint64_t{1} << (f.bits - 1) : 0;
}
/// The exponent and fraction fields (for int8: the bits below the sign).
ROUNDSCOPE_HD constexpr std::uint64_t magnitude_mask(const Format& f) {
    const int width = f.encoding == Encoding::int8 ? f.bits - 1 : f.exp_bits + f.man_bits;
    return (std::uint64_t{1} << width) - 1;
}
/// Bits that no value of the format uses (UE4M3's top bit); a pattern with one set is invalid.
ROUNDSCOPE_HD constexpr std::uint64_t unused_mask(const Format& f) {
    const std::uint64_t all = f.bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << f.bits) - 1;
    return all & ~(sign_mask(f) | magnitude_mask(f));
}
ROUNDSCOPE_HD constexpr std::uint64_t fraction_mask(const Format& f) { return (std::uint64_t{1} << f.man_bits) - 1; }
ROUNDSCOPE_HD constexpr std::uint64_t exponent_field_max(const Format& f) {
    return (std::uint64_t{1} << f.exp_bits) - 1;
}
/// Unbiased exponent of the smallest normal number (the subnormal quantum is 2^(emin - man_bits)).
/// int8 is modelled as a format whose every value is "subnormal" with quantum 2^-man_bits.
ROUNDSCOPE_HD constexpr int emin(const Format& f) {
    switch (f.encoding) {
        case Encoding::e8m0:
            return -f.bias;
        case Encoding::int8:
            return 0;
        default:
            return 1 - f.bias;
    }
}

/// Encoding of the largest finite magnitude.
ROUNDSCOPE_HD constexpr std::uint64_t max_finite_bits(const Format& f) {
    const std::uint64_t e_all = exponent_field_max(f), m_all = fraction_mask(f);
    switch (f.encoding) {
        case Encoding::ieee:
            return ((e_all - 1) << f.man_bits) | m_all;
        case Encoding::fn:
            return (e_all << f.man_bits) | (m_all - 1);
        case Encoding::fnuz:
        case Encoding::finite:
            return (e_all << f.man_bits) | m_all;
        case Encoding::e8m0:
            return 0xFE;
        case Encoding::int8:
            return 0x7F;  // q = 127; -128 decodes but casts saturate symmetrically
    }
    return 0;
}

/// The largest finite magnitude as m * 2^q, m with the hidden bit (used for overflow tests).
struct ScaledInt {
    std::uint64_t m;
    int q;
};
ROUNDSCOPE_HD constexpr ScaledInt max_finite_scaled(const Format& f) {
    const std::uint64_t bits = max_finite_bits(f);
    switch (f.encoding) {
        case Encoding::e8m0:
            return {1, static_cast<int>(bits) - f.bias};
        case Encoding::int8:
            return {bits, -f.man_bits};
        default: {
            const int e = static_cast<int>(bits >> f.man_bits);
            return {(bits & fraction_mask(f)) | (std::uint64_t{1} << f.man_bits), e - f.bias - f.man_bits};
        }
    }
}

/// The canonical NaN of the format with a clear sign bit, all other bits set where the
/// format allows (what NVIDIA's conversions return); 0 for formats without NaN.
ROUNDSCOPE_HD constexpr std::uint64_t canonical_nan_bits(const Format& f) {
    switch (f.encoding) {
        case Encoding::ieee:
        case Encoding::fn:
            return magnitude_mask(f);
        case Encoding::fnuz:
            return sign_mask(f);
        case Encoding::e8m0:
            return 0xFF;
        default:
            return 0;
    }
}

/// Is `bits` a NaN encoding of f?
ROUNDSCOPE_HD constexpr bool is_nan_bits(const Format& f, std::uint64_t bits) {
    const std::uint64_t mag = bits & magnitude_mask(f);
    switch (f.encoding) {
        case Encoding::ieee:
            return (mag >> f.man_bits) == exponent_field_max(f) && (mag & fraction_mask(f)) != 0;
        case Encoding::fn:
            return mag == magnitude_mask(f) || (bits & unused_mask(f)) != 0;
        case Encoding::fnuz:
            return bits == sign_mask(f);
        case Encoding::e8m0:
            return bits == 0xFF;
        default:
            return false;
    }
}
ROUNDSCOPE_HD constexpr bool is_inf_bits(const Format& f, std::uint64_t bits) {
    return has_inf(f) && (bits & magnitude_mask(f)) == (exponent_field_max(f) << f.man_bits);
}

/// Look a format up by its name or one of the aliases of the CLI contract; nullptr if unknown.
const Format* find_format(std::string_view name);

/// The format called `name`; an Error naming it and the known formats otherwise.
const Format& format_named(std::string_view name);

}  // namespace roundscope::emu
