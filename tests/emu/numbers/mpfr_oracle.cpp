#include "tests/emu/numbers/mpfr_oracle.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <gmp.h>
#include <mpfr.h>

#include "emu/numbers/unpack.hpp"

namespace roundscope::test {
namespace {

using emu::Encoding;
using emu::RoundingMode;

constexpr double inf = std::numeric_limits<double>::infinity();

// Rounds x to the format's grid (precision p, smallest exponent emin, subnormals as the spec
// has them) with an unbounded largest exponent, so that overflow can be judged afterwards.
double round_on_grid(double x, const SpecLimits& s, mpfr_rnd_t rnd) {
    const mpfr_exp_t old_emin = mpfr_get_emin(), old_emax = mpfr_get_emax();
    // MPFR writes x = 0.1b... * 2^E, one more than the IEEE exponent 1.b... * 2^e.
    const int lowest = s.has_subnormals ? s.emin - (s.precision - 1) : s.emin;
    mpfr_set_emin(lowest + 1);
    mpfr_set_emax(4096);
    mpfr_t y;
    mpfr_init2(y, s.precision);
    int t = mpfr_set_d(y, x, rnd);
    if (s.has_subnormals) t = mpfr_subnormalize(y, t, rnd);
    (void)t;
    const double r = mpfr_get_d(y, MPFR_RNDN);  // exact: the grid lies inside binary64
    mpfr_clear(y);
    mpfr_set_emin(old_emin);
    mpfr_set_emax(old_emax);
    return r;
}

// Parity of v on the format's grid: v / 2^(max(E, emin) - (p - 1)) mod 2.
bool odd_on_grid(double v, const SpecLimits& s) {
    if (v == 0) return false;
    int e = 0;
    std::frexp(v, &e);  // v = f * 2^e, f in [0.5, 1): IEEE exponent e - 1
    const int quantum = std::max(e - 1, s.emin) - (s.precision - 1);
    const double k = std::ldexp(std::fabs(v), -quantum);  // an integer below 2^54
    return std::fmod(k, 2.0) == 1.0;
}

// |x| >= (|lo| + |hi|) / 2, compared exactly (the midpoint needs at most 56 bits).
bool at_or_past_midpoint(double x, double lo, double hi) {
    mpfr_t mid, ax;
    mpfr_init2(mid, 128);
    mpfr_init2(ax, 64);
    mpfr_set_d(mid, lo, MPFR_RNDN);
    mpfr_add_d(mid, mid, hi, MPFR_RNDN);
    mpfr_div_2ui(mid, mid, 1, MPFR_RNDN);
    mpfr_set_d(ax, x, MPFR_RNDN);
    const int cmp = mpfr_cmpabs(ax, mid);
    mpfr_clear(ax);
    mpfr_clear(mid);
    return cmp >= 0;
}

}  // namespace

SpecLimits spec_limits(const emu::Format& f) {
    const std::string_view n = f.name;
    if (n == "f64") return {std::numeric_limits<double>::max(), -1022, 53, true};
    if (n == "f32") return {std::numeric_limits<float>::max(), -126, 24, true};
    if (n == "f16") return {65504.0, -14, 11, true};
    if (n == "bf16") return {0x1.fep127, -126, 8, true};
    if (n == "e4m3" || n == "ue4m3") return {448.0, -6, 4, true};
    if (n == "e5m2") return {57344.0, -14, 3, true};
    if (n == "e2m3") return {7.5, 0, 4, true};
    if (n == "e3m2") return {28.0, -2, 3, true};
    if (n == "e2m1") return {6.0, 0, 2, true};
    if (n == "e8m0") return {0x1p127, -127, 1, false};
    if (n == "e4m3fnuz") return {240.0, -7, 4, true};
    if (n == "e5m2fnuz") return {57344.0, -15, 3, true};
    if (n == "int8") return {127.0 / 64, -6, 1, true};  // fixed point: handled apart
    throw std::logic_error("oracle: no spec limits for " + std::string(n));
}

Neighbours oracle_neighbours(const emu::Format& f, double x) {
    Neighbours n;
    if (!std::isfinite(x) || x == 0) return n;
    const SpecLimits s = spec_limits(f);
    if (f.encoding == Encoding::int8) {
        // q = x * 64 rounded to an integer; the value is q / 64.
        const double scaled = std::ldexp(x, 6);  // exact
        const double tz = std::trunc(scaled);
        const double aw = tz == scaled ? tz : tz + (x < 0 ? -1 : 1);
        n.toward_zero = std::ldexp(tz, -6);
        n.away = std::ldexp(aw, -6);
        n.nearest_even = std::ldexp(std::nearbyint(scaled), -6);  // default environment: ties to even
        n.at_or_past_midpoint = std::fabs(scaled - tz) >= 0.5;
        n.toward_zero_is_odd = std::fmod(tz, 2.0) != 0;
        return n;
    }
    n.toward_zero = round_on_grid(x, s, MPFR_RNDZ);
    n.away = round_on_grid(x, s, MPFR_RNDA);
    n.nearest_even = round_on_grid(x, s, MPFR_RNDN);
    n.at_or_past_midpoint = at_or_past_midpoint(x, n.toward_zero, n.away);
    n.toward_zero_is_odd = odd_on_grid(n.toward_zero, s);
    return n;
}

OracleResult oracle_cast(const emu::Format& f, double x, const Neighbours& n, double source_min_normal,
                         const emu::CastOptions& o) {
    const SpecLimits s = spec_limits(f);
    const bool has_inf = f.encoding == Encoding::ieee;
    const bool has_nan = !(f.encoding == Encoding::finite || f.encoding == Encoding::int8);
    const bool signed_zero = f.is_signed && f.encoding != Encoding::fnuz && f.encoding != Encoding::int8;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto zero = [&](bool negative) -> OracleResult {
        if (f.encoding == Encoding::e8m0) return {true, 0};  // E8M0 has no zero
        return {false, negative && signed_zero ? -0.0 : 0.0};
    };
    auto finite = [](double v) { return OracleResult{false, v}; };

    if (std::isnan(x)) {
        if (has_nan) return {true, nan};
        if (f.encoding == Encoding::int8) return finite(0);
        switch (o.nan_to_finite) {
            case emu::NanToFinite::max_positive:
                return finite(s.max);
            case emu::NanToFinite::zero:
                return zero(o.nan_sign == emu::NanSign::keep && std::signbit(x));
            case emu::NanToFinite::negated_zero:
                return zero(!std::signbit(x));
        }
    }
    // torch's float8_e8m0fnu: a negative input counts as its magnitude, a zero as 2^-127
    const bool magnitude = !f.is_signed && o.unsigned_magnitude;
    if (magnitude && std::signbit(x)) return oracle_cast(f, -x, oracle_neighbours(f, -x), source_min_normal, o);
    const bool negative = std::signbit(x);
    if (x == 0 || (o.flush_input && std::fabs(x) < source_min_normal))
        return magnitude && f.encoding == Encoding::e8m0 ? finite(0x1p-127) : zero(negative);
    if (!f.is_signed && negative)
        return o.saturate && f.encoding != Encoding::e8m0 ? finite(0.0) : OracleResult{true, nan};
    auto overflow = [&](bool toward_zero_mode) -> OracleResult {
        if (o.saturate || toward_zero_mode || !(has_inf || has_nan)) return finite(negative ? -s.max : s.max);
        return has_inf ? finite(negative ? -inf : inf) : OracleResult{true, nan};
    };
    if (std::isinf(x)) return overflow(false);

    double r = n.toward_zero;
    if (n.toward_zero != x) {
        switch (o.mode) {
            case RoundingMode::nearest_even:
                r = n.nearest_even;
                break;
            case RoundingMode::nearest_away:
                r = n.at_or_past_midpoint ? n.away : n.toward_zero;
                break;
            case RoundingMode::toward_zero:
                break;
            case RoundingMode::toward_positive:
                r = negative ? n.toward_zero : n.away;
                break;
            case RoundingMode::toward_negative:
                r = negative ? n.away : n.toward_zero;
                break;
            case RoundingMode::to_odd:
                r = n.toward_zero_is_odd ? n.toward_zero : n.away;
                break;
            default:
                throw std::logic_error("oracle: stochastic modes are not deterministic");
        }
    }
    if (f.encoding == Encoding::e8m0 && r == 0) r = 0x1p-127;  // no zero: the smallest scale
    if (r == 0) return zero(negative);
    const bool toward_zero_mode = o.mode == RoundingMode::toward_zero || o.mode == RoundingMode::to_odd ||
                                  (o.mode == RoundingMode::toward_positive && negative) ||
                                  (o.mode == RoundingMode::toward_negative && !negative);
    if (std::fabs(r) > s.max) return overflow(toward_zero_mode);
    if (o.flush_output && s.has_subnormals && f.encoding != Encoding::int8 && std::fabs(r) < std::ldexp(1.0, s.emin))
        return zero(negative);
    return finite(r);
}

OracleResult oracle_decode(const emu::Format& f, std::uint64_t bits) {
    const SpecLimits s = spec_limits(f);
    const int man = s.precision - 1;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    mpfr_t v;
    mpfr_init2(v, 128);
    OracleResult r;
    if (f.encoding == Encoding::int8) {
        const long q = static_cast<long>(bits & 0x7F) - ((bits & 0x80) ? 128 : 0);
        mpfr_set_si(v, q, MPFR_RNDN);
        mpfr_div_2ui(v, v, 6, MPFR_RNDN);
    } else if (f.encoding == Encoding::e8m0) {
        if (bits == 0xFF) r.is_nan = true;
        mpfr_set_ui_2exp(v, 1, static_cast<long>(bits) - 127, MPFR_RNDN);
    } else {
        const int ebits = f.exp_bits, mbits = man;
        const bool negative = f.is_signed && ((bits >> (ebits + mbits)) & 1);
        const std::uint64_t e = (bits >> mbits) & ((1u << ebits) - 1), m = bits & ((1u << mbits) - 1);
        const std::uint64_t e_all = (1u << ebits) - 1, m_all = (1u << mbits) - 1;
        const bool unused_bit_set = !f.is_signed && (bits >> (ebits + mbits)) != 0;
        if (f.encoding == Encoding::ieee && e == e_all) {
            if (m != 0)
                r.is_nan = true;
            else
                mpfr_set_inf(v, negative ? -1 : 1);
        } else if ((f.encoding == Encoding::fn && e == e_all && m == m_all) || unused_bit_set) {
            r.is_nan = true;
        } else if (f.encoding == Encoding::fnuz && negative && e == 0 && m == 0) {
            r.is_nan = true;
        } else {
            // (-1)^s * 2^(max(e, 1) - bias) * (hidden + m / 2^man), hidden = (e != 0).
            mpfr_set_ui(v, (e != 0 ? (std::uint64_t{1} << mbits) : 0) + m, MPFR_RNDN);
            mpfr_mul_2si(v, v, static_cast<long>(std::max<std::uint64_t>(e, 1)) - f.bias - mbits, MPFR_RNDN);
            if (negative) mpfr_neg(v, v, MPFR_RNDN);
        }
    }
    r.value = r.is_nan ? nan : mpfr_get_d(v, MPFR_RNDN);
    mpfr_clear(v);
    return r;
}

bool same_result(const emu::Format& f, std::uint64_t bits, const OracleResult& r) {
    const double got = emu::decode(f, bits);
    if (r.is_nan || std::isnan(got)) return r.is_nan && std::isnan(got);
    return got == r.value && std::signbit(got) == std::signbit(r.value);
}

}  // namespace roundscope::test
