#pragma once
// Exact decoding: every bit pattern of every format becomes sign, class and m * 2^e with an
// integer m. Casts start from this form, so a conversion between any two formats rounds once.
#include <cstdint>
#include <limits>

#include "emu/numbers/format.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu {

enum class ValueClass : std::uint8_t { zero, finite, inf, nan };

struct Unpacked {
    ValueClass cls = ValueClass::zero;
    bool negative = false;
    bool subnormal = false;  // a subnormal of the source format (what flush-on-input zeroes)
    std::uint64_t m = 0;     // |x| = m * 2^e, m != 0 when cls == finite; a NaN of an IEEE
                             // format: its payload, m * 2^e in [0, 1)
    int e = 0;
};

ROUNDSCOPE_HD constexpr Unpacked unpack(const Format& f, std::uint64_t bits) {
    Unpacked x;
    if (is_nan_bits(f, bits)) {
        x.cls = ValueClass::nan;
        x.negative = f.is_signed && (bits & sign_mask(f)) != 0;
        // The payload, as a fraction m * 2^e in [0, 1), for conversions that carry it over.
        if (f.encoding == Encoding::ieee) x.m = bits & fraction_mask(f), x.e = -f.man_bits;
        return x;
    }
    if (f.encoding == Encoding::int8) {
        const std::int64_t q = static_cast<std::int8_t>(static_cast<std::uint8_t>(bits));
        x.negative = q < 0;
        x.m = static_cast<std::uint64_t>(q < 0 ? -q : q);
        x.e = -f.man_bits;
        x.cls = x.m == 0 ? ValueClass::zero : ValueClass::finite;
        return x;
    }
    if (f.encoding == Encoding::e8m0) {
        x.cls = ValueClass::finite;
        x.m = 1;
        x.e = static_cast<int>(bits) - f.bias;
        return x;
    }
    x.negative = (bits & sign_mask(f)) != 0;
    const std::uint64_t field = (bits & magnitude_mask(f)) >> f.man_bits;
    const std::uint64_t fraction = bits & fraction_mask(f);
    if (is_inf_bits(f, bits)) {
        x.cls = ValueClass::inf;
    } else if (field == 0) {
        x.cls = fraction == 0 ? ValueClass::zero : ValueClass::finite;
        x.subnormal = fraction != 0;
        x.m = fraction;
        x.e = emin(f) - f.man_bits;
    } else {
        x.cls = ValueClass::finite;
        x.m = fraction | (std::uint64_t{1} << f.man_bits);
        x.e = static_cast<int>(field) - f.bias - f.man_bits;
    }
    return x;
}

/// m * 2^e as a double, for values that are normal (or zero) in binary64: every value of every
/// format of 32 bits or fewer is.
ROUNDSCOPE_HD constexpr double exact_double(bool negative, std::uint64_t m, int e) {
    const std::uint64_t sign = negative ? std::uint64_t{1} << 63 : 0;
    if (m == 0) return double_from_bits(sign);
    const int width = bit_width(m);  // <= 53 for every format we decode
    const int exponent = e + width - 1;
    const std::uint64_t fraction = (m << (53 - width)) & ((std::uint64_t{1} << 52) - 1);
    return double_from_bits(sign | (static_cast<std::uint64_t>(exponent + 1023) << 52) | fraction);
}

/// The exact value of a bit pattern, as a double.
ROUNDSCOPE_HD inline double decode(const Format& f, std::uint64_t bits) {
    if (f.encoding == Encoding::ieee && f.bits == 64) return double_from_bits(bits);
    const Unpacked x = unpack(f, bits);
    switch (x.cls) {
        case ValueClass::nan:
            return x.negative ? -std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::quiet_NaN();
        case ValueClass::inf:
            return x.negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
        case ValueClass::zero:
            return exact_double(x.negative, 0, 0);
        case ValueClass::finite:
            break;
    }
    return exact_double(x.negative, x.m, x.e);
}

}  // namespace roundscope::emu
