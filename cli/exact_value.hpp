#pragma once
// Reading a VALUE of `roundscope cast` without rounding it twice. A decimal like 0.1 has no
// exact binary value; it is read with MPFR, rounded to odd at 62 bits (toward zero, then the
// last bit set if anything was discarded). Rounding that to any format of at most 53 bits of
// precision gives the correctly rounded result in every deterministic mode (Boldo and
// Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to
// odd", IEEE TC 2008: round-to-odd at p + 2 bits is innocuous).
#include <string>

#include "emu/numbers/unpack.hpp"

namespace roundscope::cli {

struct ExactValue {
    emu::Unpacked odd62;  // the value rounded to odd at 62 bits (exact when it fits)
    std::string text;     // as the user wrote it
};

/// Parses decimal or hex-float text ("0.1", "-3e-5", "0x1.8p-3", "inf", "nan"); throws Error
/// naming the value when the whole text is not a number.
ExactValue parse_exact_value(const std::string& text);

/// |decoded - exact input| and that divided by |exact input|, computed with MPFR at 4096 bits
/// and rounded to double (rel_error is inf for a zero input with a nonzero error).
struct CastError {
    double abs_error;
    double rel_error;
};
CastError cast_error(const std::string& text, double decoded);

}  // namespace roundscope::cli
