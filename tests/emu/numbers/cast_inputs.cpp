#include "tests/emu/numbers/cast_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "lib/bits.hpp"
#include "tests/emu/numbers/mpfr_oracle.hpp"

namespace roundscope::test {
namespace {

void add_signed(std::vector<CastInput>& out, double v) {
    out.push_back({v, false});
    out.push_back({-v, false});
    if (static_cast<double>(static_cast<float>(v)) == v) {
        out.push_back({v, true});
        out.push_back({-v, true});
    }
}

// The positive finite values of a format of at most 16 bits, from the spec formula.
std::vector<double> grid(const emu::Format& f) {
    std::vector<double> values;
    for (std::uint64_t b = 0; b < (std::uint64_t{1} << f.bits); ++b) {
        const OracleResult r = oracle_decode(f, b);
        if (!r.is_nan && std::isfinite(r.value) && r.value > 0) values.push_back(r.value);
    }
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    return values;
}

}  // namespace

std::vector<CastInput> cast_inputs(const emu::Format& f, std::size_t count, std::uint64_t seed) {
    std::vector<CastInput> out;
    const SpecLimits s = spec_limits(f);
    const double inf = std::numeric_limits<double>::infinity();
    const double min_normal = std::ldexp(1.0, s.emin);
    const double min_sub = s.has_subnormals ? std::ldexp(1.0, s.emin - (s.precision - 1)) : min_normal;
    const double ulp_max = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(s.max))) - (s.precision - 1));
    for (double v : {0.0, inf, std::numeric_limits<double>::quiet_NaN(), s.max, s.max + ulp_max / 2, s.max + ulp_max,
                     min_normal, min_sub, min_sub / 2, min_sub / 4, min_sub * 1.5, std::numeric_limits<double>::max(),
                     std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::min()}) {
        add_signed(out, v);
        if (std::isfinite(v) && v != 0) {
            add_signed(out, std::nextafter(v, 0.0));
            add_signed(out, std::nextafter(v, inf));
        }
    }
    if (f.bits <= 16) {
        const std::vector<double> values = grid(f);
        double previous = 0;
        for (double v : values) {
            const double mid = previous + (v - previous) / 2;  // exact: both are short dyadics
            for (double w :
                 {v, mid, mid * (1 + 0x1p-40), mid * (1 - 0x1p-40), std::nextafter(mid, 0.0), std::nextafter(mid, inf)})
                add_signed(out, w);
            previous = v;
        }
        const double above = s.max + (s.max - values[values.size() - 2]) / 2;  // the overflow midpoint
        for (double w : {above, above * (1 + 0x1p-40), above * (1 - 0x1p-40)}) add_signed(out, w);
    }
    std::mt19937_64 rng(seed);
    const int e_lo = s.emin - s.precision - 3, e_hi = static_cast<int>(std::log2(s.max)) + 3;
    while (out.size() < count) {
        const std::uint64_t r = rng();
        switch (out.size() % 3) {
            case 0:
                out.push_back({double_from_bits(r), false});
                break;
            case 1: {
                const int e = e_lo + static_cast<int>(rng() % static_cast<std::uint64_t>(e_hi - e_lo + 1));
                const double m = 1.0 + std::ldexp(static_cast<double>(r >> 12), -52);
                out.push_back({std::ldexp((r & 1) ? -m : m, e), false});
                break;
            }
            default:
                out.push_back({static_cast<double>(float_from_bits(static_cast<std::uint32_t>(r))), true});
        }
    }
    return out;
}

}  // namespace roundscope::test
