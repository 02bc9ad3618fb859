#pragma once
// The numbers and special encodings of a format, derived from its descriptor (for the
// `formats` table and for tests that enumerate boundaries).
#include <string>

#include "emu/numbers/format.hpp"

namespace roundscope::emu {

struct FormatInfo {
    double max;            // largest finite value
    double min_normal;     // smallest positive normal (int8: the quantum; e8m0: 2^-127)
    double min_subnormal;  // smallest positive value
    std::string inf;       // encodings of +Inf and -Inf, or "none"
    std::string nan;       // the NaN encodings, or "none"
};

FormatInfo format_info(const Format& f);

}  // namespace roundscope::emu
