#pragma once
// One OCP MX block, quantized and dequantized: the scalar reference every batch path equals.
// The rules and their spec sections are in mx_scale.hpp. V_i / X is formed exactly (X is a
// power of two) and rounded once into the element format, saturating (6.3: "clamp normal
// numbers"), in any rounding mode; element i draws on random stream index[i].
#include <cstdint>
#include <limits>

#include "emu/block/mx_scale.hpp"
#include "emu/numbers/round.hpp"

namespace roundscope::emu {

/// Quantizes n values (exact, as Unpacked) into out[0..n); returns the E8M0 scale bits.
ROUNDSCOPE_HD constexpr std::uint64_t mx_quantize_block(const Unpacked* v, int n, const Format& element, ScaleRule rule,
                                                        const CastOptions& options, const std::uint64_t* index,
                                                        std::uint64_t* out) {
    CastOptions o = options;
    o.saturate = true;
    bool special = false;
    Unpacked amax;  // zero
    for (int i = 0; i < n; ++i) {
        if (v[i].cls == ValueClass::nan || v[i].cls == ValueClass::inf) special = true;
        if (v[i].cls != ValueClass::finite) continue;
        const int top_i = v[i].e + bit_width(v[i].m) - 1;
        const int top_a = amax.e + bit_width(amax.m) - 1;
        // Compare magnitudes: by top exponent, then by left-aligned significand.
        const bool larger =
            amax.cls == ValueClass::zero || top_i > top_a ||
            (top_i == top_a && (v[i].m << (64 - bit_width(v[i].m))) > (amax.m << (64 - bit_width(amax.m))));
        if (larger) amax = v[i];
    }
    if (special) {
        // X is NaN: elements are V_i / NaN, i.e. NaN where the format has one, else zero.
        for (int i = 0; i < n; ++i) out[i] = has_nan(element) ? canonical_nan_bits(element) : 0;
        return e8m0_nan;
    }
    const int k = mx_shared_exponent(amax, element, rule);
    for (int i = 0; i < n; ++i) {
        Unpacked q = v[i];
        q.e -= k;
        q.subnormal = false;
        out[i] = round_to_format(element, q, o, index[i]);
    }
    return static_cast<std::uint64_t>(k + 127);
}

/// The value of element bits `p` in a block with E8M0 scale bits `scale`, as a double
/// (exact: element values times 2^[-127, 127] are normal doubles).
ROUNDSCOPE_HD inline double mx_dequantize(const Format& element, std::uint64_t p, std::uint64_t scale) {
    const Unpacked x = unpack(element, p);
    if (scale == e8m0_nan || x.cls == ValueClass::nan) return std::numeric_limits<double>::quiet_NaN();
    if (x.cls == ValueClass::inf)
        return x.negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    if (x.cls == ValueClass::zero) return x.negative ? -0.0 : 0.0;
    return exact_double(x.negative, x.m, x.e + static_cast<int>(scale) - 127);
}

}  // namespace roundscope::emu
