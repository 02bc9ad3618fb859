#pragma once
// Is a value exactly a value of a format? The question `inspect` asks of every element
// ("what fraction of this tensor would survive a cast to e4m3 unchanged?"). Equivalent to
// decode(f, cast(x)) == x under any round-to-nearest mode without saturation, which
// tests/emu/numbers/test_representable.cpp checks on every value of every format of 16 bits or fewer.
#include <bit>

#include "emu/numbers/format.hpp"
#include "emu/numbers/unpack.hpp"

namespace roundscope::emu {

/// True when the finite x equals some value of f; zeros count whatever their sign (the value
/// is what matters, and fnuz formats hold only +0). NaN and Inf are never counted.
/// `max` is f's largest finite value, decode(f, max_finite_bits(f)), which a caller testing
/// many values computes once.
ROUNDSCOPE_HD inline bool is_representable(double x, const Format& f, double max) {
    const Unpacked u = unpack(f64, bits_of(x));
    if (u.cls == ValueClass::nan || u.cls == ValueClass::inf) return false;
    if (u.cls == ValueClass::zero) return f.encoding != Encoding::e8m0;
    if (u.negative && !f.is_signed) return false;
    const int top = u.e + bit_width(u.m) - 1;  // |x| in [2^top, 2^(top+1))
    const int lowest = u.e + std::countr_zero(u.m);
    // Values of f at binade `top` are multiples of 2^(max(top, emin) - man_bits).
    const int quantum = (top > emin(f) ? top : emin(f)) - f.man_bits;
    if (lowest < quantum) return false;
    if (f.encoding == Encoding::int8 && u.negative) return -x <= max + 1.0 / (1 << f.man_bits);  // q = -128
    return (u.negative ? -x : x) <= max;
}

ROUNDSCOPE_HD inline bool is_representable(double x, const Format& f) {
    return is_representable(x, f, decode(f, max_finite_bits(f)));
}

}  // namespace roundscope::emu
