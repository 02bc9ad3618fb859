#pragma once
// x * s for a cast with a scale ("multiply by S, then round"): the product is formed exactly
// and rounded once, by the cast. When the product's significand needs more than 64 bits it is
// rounded to odd at 62 bits first; a later rounding to any format of at most 60 significand
// bits then still gives the correctly rounded product (Boldo and Melquiond, "Emulation of FMA
// and correctly rounded sums: proved algorithms using rounding to odd", IEEE Trans. Computers
// 57(4), 2008). Stochastic rounding sees the odd value: its probabilities are then exact to
// 2^-(62 - p) relative, p the target's precision.
#include "emu/numbers/unpack.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu {

ROUNDSCOPE_HD constexpr Unpacked scaled(const Unpacked& x, const Unpacked& s) {
    Unpacked r;
    r.negative = x.negative != s.negative;
    const bool any_nan = x.cls == ValueClass::nan || s.cls == ValueClass::nan;
    const bool inf_times_zero = (x.cls == ValueClass::inf && s.cls == ValueClass::zero) ||
                                (x.cls == ValueClass::zero && s.cls == ValueClass::inf);
    if (any_nan || inf_times_zero) {
        r.cls = ValueClass::nan;
        r.negative = any_nan ? (x.cls == ValueClass::nan ? x.negative : s.negative) : false;
        return r;
    }
    if (x.cls == ValueClass::inf || s.cls == ValueClass::inf) {
        r.cls = ValueClass::inf;
        return r;
    }
    if (x.cls == ValueClass::zero || s.cls == ValueClass::zero) {
        r.cls = ValueClass::zero;
        return r;
    }
    r.cls = ValueClass::finite;
    r.subnormal = false;  // a product is a new value, not a subnormal input of any format
    unsigned __int128 p = static_cast<unsigned __int128>(x.m) * s.m;
    int e = x.e + s.e;
    const int width =
        (p >> 64) != 0 ? 64 + bit_width(static_cast<std::uint64_t>(p >> 64)) : bit_width(static_cast<std::uint64_t>(p));
    if (width > 64) {
        const int drop = width - 62;
        const bool sticky = (p & ((static_cast<unsigned __int128>(1) << drop) - 1)) != 0;
        p = (p >> drop) | (sticky ? 1 : 0);
        e += drop;
    }
    r.m = static_cast<std::uint64_t>(p);
    r.e = e;
    return r;
}

}  // namespace roundscope::emu
