#include "analysis/truth/double_double.hpp"

#include <mpfr.h>

#include <array>
#include <cstddef>
#include <limits>

namespace roundscope::analysis::dd {
namespace {

// A real constant as a ball: hi and lo from MPFR at 256 bits, and a radius that covers what
// lo leaves out (at most half an ulp of lo) and the 256-bit value's own error.
template <class Setter>
Ball constant(Setter set) {
    mpfr_t c, rest;
    mpfr_init2(c, 256);
    mpfr_init2(rest, 256);
    set(c);
    const double hi = mpfr_get_d(c, MPFR_RNDN);
    mpfr_sub_d(rest, c, hi, MPFR_RNDN);  // exact: c and hi agree in their leading bits
    const double lo = mpfr_get_d(rest, MPFR_RNDN);
    mpfr_clear(c);
    mpfr_clear(rest);
    return {{hi, lo}, std::fabs(lo) * 0x1p-52 + std::fabs(hi) * 0x1p-250};
}

ExpTables make_tables() {
    ExpTables c;
    c.ln2_over_table = constant([](mpfr_ptr x) {
        mpfr_const_log2(x, MPFR_RNDN);
        mpfr_div_2ui(x, x, table_bits, MPFR_RNDN);
    });
    for (std::size_t j = 0; j < c.powers.size(); ++j) {
        c.powers[j] = constant([j](mpfr_ptr x) {
            mpfr_set_ui(x, static_cast<unsigned long>(j), MPFR_RNDN);
            mpfr_div_2ui(x, x, table_bits, MPFR_RNDN);
            mpfr_exp2(x, x, MPFR_RNDN);
        });
    }
    for (int j = 0; j < static_cast<int>(c.inverse_factorial.size()); ++j) {
        c.inverse_factorial[static_cast<std::size_t>(j)] = constant([j](mpfr_ptr x) {
            mpfr_fac_ui(x, static_cast<unsigned long>(j), MPFR_RNDN);
            mpfr_ui_div(x, 1, x, MPFR_RNDN);
        });
    }
    return c;
}

}  // namespace

const ExpTables& exp_tables() {
    static const ExpTables c = make_tables();
    return c;
}

Ball exp(const Ball& x) {
    const ExpTables& c = exp_tables();
    // x = (1024 m + j) ln2 / 1024 + r.
    const double k = std::nearbyint(x.v.hi * (1024 * 1.4426950408889634));
    const Ball r = add(x, negate(mul(c.ln2_over_table, k)));  // |r| <= ln2 / 2048 + tiny
    // A degree-8 Taylor polynomial of e^r; remainder |r|^9 / 9! e^|r| < 2 |r|^9 / 9! for |r| < 0.001.
    Ball p = c.inverse_factorial[8];
    for (int j = 7; j >= 0; --j) p = add(mul(p, r), c.inverse_factorial[static_cast<std::size_t>(j)]);
    const double rmax = up(magnitude(r.v) + r.r);
    const double r3 = rmax * rmax * rmax;
    p.r = up(p.r + 2 * (r3 * r3 * r3) / 362880.0 * (1 + 0x1p-40));
    const auto ki = static_cast<long long>(k);
    const long long m = ki >= 0 ? ki >> table_bits : -((-ki + (1 << table_bits) - 1) >> table_bits);
    const auto j = static_cast<std::size_t>(ki - m * (1 << table_bits));
    return scale2(mul(p, c.powers[j]), static_cast<int>(m));
}

bool round_to_double(const Ball& x, double& out) {
    const double d = x.v.hi;
    if (d == 0 && x.v.lo == 0 && x.r == 0) {  // an exact zero (exact-zero inputs keep a zero radius)
        out = 0;
        return true;
    }
    if (!std::isfinite(d) || std::fabs(d) < 0x1p-1020 || std::fabs(d) > 0x1p1020) return false;
    const double above = std::nextafter(d, std::numeric_limits<double>::infinity()) - d;
    const double below = d - std::nextafter(d, -std::numeric_limits<double>::infinity());
    const double half_gap = 0.5 * (above < below ? above : below);
    if (up(std::fabs(x.v.lo) + x.r) >= half_gap) return false;
    out = d;
    return true;
}

}  // namespace roundscope::analysis::dd
