#include "tests/emu/block/mx_mpfr_check.hpp"

#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "analysis/mpfr_value.hpp"
#include "emu/block/mx_block.hpp"
#include "lib/parallel.hpp"
#include "tests/emu/numbers/mpfr_oracle.hpp"

namespace roundscope::test {

using namespace roundscope::emu;

namespace {

// ---- An independent reference: MPFR for log2(amax) and amax / max_elem, the element grid from the
// spec's decoding formula (oracle_decode), nearest-even chosen by search over that grid. ----

struct Grid {
    std::vector<std::pair<double, std::uint64_t>> points;  // (value, bits), sorted; no NaN, no -0
    double max = 0;
};

Grid grid_of(const Format& f) {
    Grid g;
    for (std::uint64_t b = 0; b < (std::uint64_t{1} << f.bits); ++b) {
        const test::OracleResult r = test::oracle_decode(f, b);
        if (r.is_nan || std::isinf(r.value) || (r.value == 0 && std::signbit(r.value))) continue;
        // MXINT8 casts saturate symmetrically to +-127 (emu/numbers/format.hpp), so -128 is never a result.
        if (f.encoding == Encoding::int8 && b == 0x80) continue;
        g.points.emplace_back(r.value, b);
        g.max = std::max(g.max, r.value);
    }
    std::sort(g.points.begin(), g.points.end());
    return g;
}

// Nearest-even on the grid, saturating at +-max; zero keeps x's sign where f has -0.
std::uint64_t nearest_even(const Format& f, const Grid& g, double x) {
    x = std::clamp(x, -g.max, g.max);
    const auto above = std::lower_bound(g.points.begin(), g.points.end(), std::make_pair(x, std::uint64_t{0}));
    std::pair<double, std::uint64_t> pick;
    if (above != g.points.end() && above->first == x) {
        pick = *above;
    } else {
        const auto below = above - 1;
        const double da = above->first - x, db = x - below->first;
        pick = da < db ? *above : db < da ? *below : ((above->second & 1) == 0 ? *above : *below);
    }
    if (pick.first == 0 && std::signbit(x) && has_negative_zero(f)) return sign_mask(f);
    return pick.second;
}

struct Reference {
    std::uint64_t scale;
    std::vector<std::uint64_t> elements;
};

Reference reference_block(const std::vector<double>& v, const Format& f, ScaleRule rule, const Grid& g) {
    Reference r{0, std::vector<std::uint64_t>(v.size())};
    for (double x : v) {
        if (std::isnan(x) || std::isinf(x)) {
            for (auto& e : r.elements) e = has_nan(f) ? canonical_nan_bits(f) : 0;
            r.scale = 0xFF;
            return r;
        }
    }
    // One set of MPFR variables per thread, reused across blocks.
    thread_local analysis::MpfrValue amax_value(128), t_value(128), q_value(128);
    mpfr_ptr amax = amax_value.get(), t = t_value.get(), q = q_value.get();
    double largest = 0;
    for (double x : v) largest = std::max(largest, std::fabs(x));
    mpfr_set_d(amax, largest, MPFR_RNDN);                                  // exact
    const int emax_elem = static_cast<int>(std::floor(std::log2(g.max)));  // of the published max
    long k = -127;
    if (!mpfr_zero_p(amax)) {
        const long floor_log2 = mpfr_get_exp(amax) - 1;  // amax = m 2^exp, 1/2 <= m < 1
        mpfr_set_ui_2exp(t, 1, floor_log2, MPFR_RNDN);
        const bool power_of_two = mpfr_equal_p(t, amax);
        switch (rule) {
            case ScaleRule::floor:
                k = floor_log2 - emax_elem;
                break;
            case ScaleRule::ceil:
                k = floor_log2 + (power_of_two ? 0 : 1) - emax_elem;
                break;
            case ScaleRule::even:
                mpfr_set_prec(q, f.man_bits + 1);
                mpfr_round_nearest_away(mpfr_set, q, amax);  // to the element's precision, halves away from zero
                k = mpfr_get_exp(q) - 1 - emax_elem;
                mpfr_set_prec(q, 128);
                break;
            case ScaleRule::rceil:
                mpfr_div_d(q, amax, g.max, MPFR_RNDU);  // exact or just above: ceil(log2) is unaffected
                mpfr_set_ui_2exp(t, 1, mpfr_get_exp(q) - 1, MPFR_RNDN);
                k = mpfr_get_exp(q) - (mpfr_equal_p(t, q) ? 1 : 0);
                break;
        }
        k = std::clamp(k, -127L, 127L);
    }
    r.scale = static_cast<std::uint64_t>(k + 127);
    // V_i / X: exact in double here (|V_i| >= 2^-1074 and |k| <= 127 keep every quotient a
    // normal double for the inputs of random_block, whose exponents lie in [-400, 300]).
    for (std::size_t i = 0; i < v.size(); ++i)
        r.elements[i] = nearest_even(f, g, std::ldexp(v[i], static_cast<int>(-k)));
    return r;
}

// Random blocks of every kind the rules must handle.
std::vector<double> random_block(std::mt19937_64& rng, double element_max) {
    const int sizes[] = {1, 2, 3, 7, 16, 32, 32, 32};
    const int n = sizes[rng() % 8];
    const int kind = static_cast<int>(rng() % 10);
    const int centre = static_cast<int>(rng() % 300) - 150;
    std::vector<double> v(n);
    for (double& x : v) {
        switch (kind) {
            case 0:
                x = 0;
                break;  // all zero
            case 1:
                x = std::bit_cast<float>(static_cast<std::uint32_t>(rng() % 0x800000));
                break;  // f32 subnormals
            case 2:
                x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
                break;  // any f32
            case 3:
                x = std::ldexp(static_cast<double>(rng() >> 11), static_cast<int>(rng() % 600) - 350);
                break;  // beyond f32
            default:
                x = std::ldexp(static_cast<double>(static_cast<std::int64_t>(rng()) >> 40), centre);
                break;  // one binade region
        }
        if (rng() % 4 == 0) x = 0;
        if (rng() % 2) x = -x;
    }
    // Exact ties and powers of two at the top, where the rules part ways.
    if (rng() % 3 == 0) v[rng() % n] = std::ldexp(1.0 + (rng() % 3) / 8.0, centre);
    // amax exactly max_elem * 2^k: where rceil must not step up.
    if (rng() % 5 == 0) v[rng() % n] = std::ldexp(element_max, centre);
    if (rng() % 50 == 0) v[rng() % n] = rng() % 2 ? NAN : -INFINITY;
    return v;
}

}  // namespace

std::size_t mx_blocks_mismatching_mpfr(const Format& f, ScaleRule rule, std::size_t blocks) {
    const Grid g = grid_of(f);
    constexpr std::size_t chunk = 10'000;
    std::vector<std::size_t> mismatches((blocks + chunk - 1) / chunk, 0);
    // Each chunk seeds its own generator, so the blocks do not depend on the thread count and a
    // shorter run checks a prefix of a longer one.
    parallel_for(blocks, chunk, 0, [&](std::size_t begin, std::size_t end) {
        std::mt19937_64 rng(begin * 7919 + static_cast<int>(rule) * 31 + f.bits);
        std::vector<std::uint64_t> index(32, 0), out(32);
        std::vector<Unpacked> u(32);
        for (std::size_t b = begin; b < end; ++b) {
            const std::vector<double> v = random_block(rng, g.max);
            for (std::size_t i = 0; i < v.size(); ++i) u[i] = unpack(f64, bits_of(v[i]));
            const std::uint64_t scale = mx_quantize_block(u.data(), static_cast<int>(v.size()), f, rule, CastOptions{},
                                                          index.data(), out.data());
            const Reference r = reference_block(v, f, rule, g);
            const bool same = scale == r.scale && std::equal(r.elements.begin(), r.elements.end(), out.begin());
            mismatches[begin / chunk] += same ? 0 : 1;
        }
    });
    std::size_t total = 0;
    for (std::size_t m : mismatches) total += m;
    return total;
}

std::vector<std::string> mx_mismatches_every_format_and_rule(std::size_t blocks) {
    std::vector<std::string> out;
    for (const Format* f : {&e4m3, &e5m2, &e2m3, &e3m2, &e2m1, &int8}) {
        for (const ScaleRule rule : all_scale_rules) {
            const std::size_t n = mx_blocks_mismatching_mpfr(*f, rule, blocks);
            if (n > 0)
                out.push_back(std::string(f->name) + " " + std::string(scale_rule_name(rule)) + ": " +
                              std::to_string(n) + " of " + std::to_string(blocks) + " blocks differ");
        }
    }
    return out;
}

}  // namespace roundscope::test
