#include "analysis/truth/double_double.hpp"

#include <mpfr.h>

#include <array>
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

struct Constants {
    Ball ln2;
    std::array<Ball, 11> inverse_factorial;  // 1/j!
    Constants() {
        ln2 = constant([](mpfr_ptr c) { mpfr_const_log2(c, MPFR_RNDN); });
        for (int j = 0; j <= 10; ++j) {
            inverse_factorial[static_cast<std::size_t>(j)] = constant([j](mpfr_ptr c) {
                mpfr_fac_ui(c, static_cast<unsigned long>(j), MPFR_RNDN);
                mpfr_ui_div(c, 1, c, MPFR_RNDN);
            });
        }
    }
};

const Constants& constants() {
    static const Constants c;
    return c;
}

}  // namespace

Ball exp(const Ball& x) {
    const Constants& c = constants();
    const double k = std::nearbyint(x.v.hi * 1.4426950408889634);
    const Ball reduced = add(x, negate(mul(c.ln2, k)));  // |reduced| <= ln2 / 2 + tiny
    const Ball y = scale2(reduced, -8);
    Ball p = c.inverse_factorial[10];
    for (int j = 9; j >= 0; --j) p = add(mul(p, y), c.inverse_factorial[static_cast<std::size_t>(j)]);
    // Taylor remainder: |y|^11 / 11! * e^|y| < 2 |y|^11 / 11! for |y| < 0.01.
    const double ymax = up(magnitude(y.v) + y.r);
    p.r = up(p.r + 2 * std::pow(ymax, 11) / 39916800.0 * (1 + 0x1p-40));
    for (int s = 0; s < 8; ++s) p = mul(p, p);
    return scale2(p, static_cast<int>(k));
}

bool round_to_double(const Ball& x, double& out) {
    const double d = x.v.hi;
    if (!std::isfinite(d) || std::fabs(d) < 0x1p-1020 || std::fabs(d) > 0x1p1020) return false;
    const double above = std::nextafter(d, std::numeric_limits<double>::infinity()) - d;
    const double below = d - std::nextafter(d, -std::numeric_limits<double>::infinity());
    const double half_gap = 0.5 * (above < below ? above : below);
    if (up(std::fabs(x.v.lo) + x.r) >= half_gap) return false;
    out = d;
    return true;
}

}  // namespace roundscope::analysis::dd
