#pragma once
// An independent reference for casts: MPFR rounds (mpfr_set_d + mpfr_subnormalize at the
// format's precision and exponent range), and the special-value policy is restated here from
// the specs and the documented options, not taken from emu/. Format limits come from the
// specs' tables (spec_limits), not from emu's derived quantities.
#include <cstdint>

#include "emu/numbers/cast_options.hpp"
#include "emu/numbers/format.hpp"

namespace roundscope::test {

/// Published limits of a format (OCP 8-bit FP v1.0 Table 1, OCP MX v1.0 Tables 2-4, IEEE 754).
struct SpecLimits {
    double max;     // largest finite
    int emin;       // exponent of the smallest normal, 2^emin
    int precision;  // significand bits including the hidden one
    bool has_subnormals;
};
SpecLimits spec_limits(const emu::Format& f);

/// The oracle's answer: a class and, for numbers, the exact value (every result is a double).
struct OracleResult {
    bool is_nan = false;
    double value = 0;  // +-Inf, a finite value, or a signed zero
};

/// The neighbours of a finite nonzero x on f's grid (unbounded above), and the mode-free
/// facts every deterministic mode chooses from; computed once per input with MPFR.
struct Neighbours {
    double toward_zero = 0, away = 0, nearest_even = 0;
    bool at_or_past_midpoint = false;  // |x| >= midpoint of the two neighbours
    bool toward_zero_is_odd = false;   // parity of the truncated value on the grid
};
Neighbours oracle_neighbours(const emu::Format& f, double x);

/// The cast of the double x (read from a source whose smallest normal is `source_min_normal`,
/// for flush-on-input) into f under deterministic options o; n = oracle_neighbours(f, x).
OracleResult oracle_cast(const emu::Format& f, double x, const Neighbours& n, double source_min_normal,
                         const emu::CastOptions& o);

/// The value of a bit pattern computed from the spec's formula with MPFR (NaN as is_nan).
OracleResult oracle_decode(const emu::Format& f, std::uint64_t bits);

/// Do emu's bits and the oracle agree? (NaN matches NaN; zeros must agree in sign.)
bool same_result(const emu::Format& f, std::uint64_t bits, const OracleResult& r);

}  // namespace roundscope::test
