#include "cli/exact_value.hpp"

#include <cmath>
#include <limits>

#include <gmp.h>
#include <mpfr.h>

#include "analysis/mpfr_value.hpp"
#include "lib/error.hpp"

namespace roundscope::cli {
namespace {

// Reads `text` entirely into x with rounding `rnd`; returns MPFR's ternary value.
int read_number(const std::string& text, mpfr_ptr x, mpfr_rnd_t rnd) {
    const char* begin = text.c_str();
    char* end = nullptr;
    const int ternary = mpfr_strtofr(x, begin, &end, 0, rnd);
    if (text.empty() || end != begin + text.size())
        throw Error("value '" + text + "' is not a number (expected decimal, hex-float like 0x1.8p-3, inf or nan)");
    return ternary;
}

}  // namespace

ExactValue parse_exact_value(const std::string& text) {
    analysis::MpfrValue x(62);
    const int ternary = read_number(text, x.get(), MPFR_RNDZ);
    ExactValue v{{}, text};
    emu::Unpacked& u = v.odd62;
    u.negative = mpfr_signbit(x.get()) != 0;
    if (mpfr_nan_p(x.get())) {
        u.cls = emu::ValueClass::nan;
    } else if (mpfr_inf_p(x.get())) {
        u.cls = emu::ValueClass::inf;
    } else if (mpfr_zero_p(x.get())) {
        u.cls = emu::ValueClass::zero;
    } else {
        // |x| in [2^(exp - 1), 2^exp). Outside float64's range the value and its errors could
        // not be reported (they would print as Inf or 0), and its exponent not held in an int.
        const mpfr_exp_t exp = mpfr_get_exp(x.get());
        if (exp > 1024 || exp < -1073)
            throw Error("value '" + printable(text) +
                        "' lies outside the float64 range (magnitudes 2^-1074 to 2^1024) in which roundscope "
                        "reports values and errors");
        mpz_t m;
        mpz_init(m);
        const mpfr_exp_t e = mpfr_get_z_2exp(m, x.get());
        mpz_abs(m, m);
        u.cls = emu::ValueClass::finite;
        u.m = mpz_get_ui(m) | (ternary != 0 ? 1u : 0u);  // round to odd
        u.e = static_cast<int>(e);
        mpz_clear(m);
    }
    return v;
}

CastError cast_error(const std::string& text, double decoded) {
    analysis::MpfrValue exact(4096), diff(4096);
    read_number(text, exact.get(), MPFR_RNDN);
    if (std::isnan(decoded) || mpfr_nan_p(exact.get()))
        return {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
    mpfr_sub_d(diff.get(), exact.get(), decoded, MPFR_RNDN);
    mpfr_abs(diff.get(), diff.get(), MPFR_RNDN);
    const double abs_error = mpfr_nan_p(diff.get()) ? 0.0 : mpfr_get_d(diff.get(), MPFR_RNDN);  // inf - inf
    if (mpfr_zero_p(exact.get())) return {abs_error, abs_error == 0 ? 0.0 : std::numeric_limits<double>::infinity()};
    mpfr_div(diff.get(), diff.get(), exact.get(), MPFR_RNDN);
    mpfr_abs(diff.get(), diff.get(), MPFR_RNDN);
    if (mpfr_nan_p(diff.get())) return {abs_error, std::numeric_limits<double>::infinity()};  // inf / inf
    return {abs_error, mpfr_get_d(diff.get(), MPFR_RNDN)};
}

}  // namespace roundscope::cli
