#pragma once
// The shared scale of an OCP MX block, under the scale-selection rules real recipes use.
//
// OCP Microscaling Formats (MX) v1.0, section 6.3 ("Conversion from vector of FP32/BF16
// to MX"):  shared_exp = floor(log2(max_i |V_i|)) - emax_elem;  X = 2^shared_exp;
// P_i = quantize_to_element_format(V_i / X), normal numbers clamped to the element's max.
// emax_elem is the exponent of the element format's largest normal (E4M3 8, E5M2 15, E2M3 2,
// E3M2 4, E2M1 2, INT8 0). The rules implemented here, on the exact value of amax:
//   floor  the spec's rule (the "minimally supported" one of 6.3; torchao FLOOR).
//   ceil   ceil(log2(amax)) - emax_elem (torchao CEIL).
//   even   floor(log2(amax rounded to the element's precision, halves up)) - emax_elem: the
//          exponent steps up when amax's significand is >= 2 - 2^-(man_bits+1) (torchao EVEN).
//   rceil  the smallest k with amax <= max_elem * 2^k: amax / max_elem rounded up to a power
//          of two, so no element saturates (cuBLAS and TransformerEngine; torchao RCEIL).
// Every rule then clamps to E8M0's range [-127, 127] (6.3: X is an E8M0 value). So an
// all-zero block (log2 0 = -inf) and a block of tiny values get X = 2^-127, and a block whose
// exponent would exceed 127 gets X = 2^127 with its elements saturated. A block holding a NaN
// gets the NaN scale (E8M0's one NaN encoding, 0xFF), and under the spec every element of a
// block with a NaN scale decodes to NaN. E8M0 cannot express a block holding an Inf either;
// roundscope gives such a block the NaN scale too (a choice: torchao's FLOOR rule instead
// reads Inf's exponent field as 2^128, which tests/peer/test_mx_torchao.py names).
#include <bit>
#include <cstdint>

#include "emu/numbers/format.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu {

enum class ScaleRule : std::uint8_t { floor, ceil, even, rceil };

inline constexpr int e8m0_min_exponent = -127, e8m0_max_exponent = 127;
inline constexpr std::uint64_t e8m0_nan = 0xFF;

/// floor(log2(max finite)) of an element format.
ROUNDSCOPE_HD constexpr int element_emax(const Format& f) {
    const ScaledInt max = max_finite_scaled(f);
    return max.q + bit_width(max.m) - 1;
}

/// The unbiased shared exponent of a block whose largest magnitude is `amax` (finite or zero),
/// clamped to E8M0's range.
ROUNDSCOPE_HD constexpr int mx_shared_exponent(const Unpacked& amax, const Format& element, ScaleRule rule) {
    if (amax.cls == ValueClass::zero) return e8m0_min_exponent;
    const int width = bit_width(amax.m);
    const int top = amax.e + width - 1;  // floor(log2(amax))
    const bool power_of_two = (amax.m & (amax.m - 1)) == 0;
    int k = 0;
    switch (rule) {
        case ScaleRule::floor:
            k = top - element_emax(element);
            break;
        case ScaleRule::ceil:
            k = top + (power_of_two ? 0 : 1) - element_emax(element);
            break;
        case ScaleRule::even: {
            const int keep = element.man_bits + 1;  // significant bits of the element
            const bool carries = width > keep && bit_width(amax.m + (std::uint64_t{1} << (width - keep - 1))) > width;
            k = top + (carries ? 1 : 0) - element_emax(element);
            break;
        }
        case ScaleRule::rceil: {
            // amax and max_elem * 2^k0 share their top exponent; k0 suffices iff amax's
            // significand is at most max_elem's, compared left-aligned.
            const ScaledInt max = max_finite_scaled(element);
            const int k0 = top - element_emax(element);
            const std::uint64_t a = amax.m << (64 - width);
            const std::uint64_t b = max.m << (64 - bit_width(max.m));
            k = a <= b ? k0 : k0 + 1;
            break;
        }
    }
    return k < e8m0_min_exponent ? e8m0_min_exponent : k > e8m0_max_exponent ? e8m0_max_exponent : k;
}

}  // namespace roundscope::emu
