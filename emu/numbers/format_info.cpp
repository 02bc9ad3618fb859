#include "emu/numbers/format_info.hpp"

#include <fmt/core.h>

#include "emu/numbers/unpack.hpp"

namespace roundscope::emu {
namespace {

std::string hex(const Format& f, std::uint64_t bits) { return fmt::format("0x{:0{}x}", bits, (f.bits + 3) / 4); }

std::string nan_description(const Format& f) {
    switch (f.encoding) {
        case Encoding::ieee:
            return fmt::format("exponent all ones, mantissa != 0 ({}..{})",
                               hex(f, (exponent_field_max(f) << f.man_bits) | 1),
                               hex(f, magnitude_mask(f) | sign_mask(f)));
        case Encoding::fn:
            return f.is_signed
                       ? fmt::format("{}, {}", hex(f, magnitude_mask(f)), hex(f, magnitude_mask(f) | sign_mask(f)))
                       : fmt::format("{} (and any pattern with bit 7 set)", hex(f, magnitude_mask(f)));
        case Encoding::fnuz:
        case Encoding::e8m0:
            return hex(f, canonical_nan_bits(f));
        default:
            return "none";
    }
}

}  // namespace

FormatInfo format_info(const Format& f) {
    FormatInfo i;
    i.max = decode(f, max_finite_bits(f));
    switch (f.encoding) {
        case Encoding::e8m0:
            i.min_normal = i.min_subnormal = decode(f, 0);
            break;
        case Encoding::int8:
            i.min_normal = i.min_subnormal = decode(f, 1);
            break;
        default:
            i.min_normal = decode(f, std::uint64_t{1} << f.man_bits);
            i.min_subnormal = decode(f, 1);
    }
    i.inf = has_inf(f) ? fmt::format("{}, {}", hex(f, exponent_field_max(f) << f.man_bits),
                                     hex(f, (exponent_field_max(f) << f.man_bits) | sign_mask(f)))
                       : "none";
    i.nan = nan_description(f);
    return i;
}

}  // namespace roundscope::emu
