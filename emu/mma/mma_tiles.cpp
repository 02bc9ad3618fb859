#include "emu/mma/mma_tiles.hpp"

#include <fmt/format.h>

#include <cmath>
#include <random>

#include "emu/block/mx_scale.hpp"
#include "emu/numbers/round.hpp"

namespace roundscope::emu {
namespace {

// Values are drawn as doubles and rounded to nearest even into the format, saturating, so
// every distribution yields finite values unless it sets special patterns on purpose.
class TileRandom {
public:
    explicit TileRandom(std::uint64_t seed) : rng_(seed) {}

    double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
    int integer(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
    double gauss() { return std::normal_distribution<double>()(rng_); }
    bool chance(double p) { return uniform(0, 1) < p; }
    double sign() { return chance(0.5) ? -1.0 : 1.0; }
    std::uint64_t bits() { return rng_(); }

private:
    std::mt19937_64 rng_;
};

std::uint32_t encode(const Format& f, double x) {
    CastOptions o;
    o.saturate = true;
    return static_cast<std::uint32_t>(cast_from_f64(x, f, o));
}

// A value of magnitude (1 + u) 2^e with e uniform in [lo, hi].
double binade_value(TileRandom& r, int lo, int hi) {
    return r.sign() * (1 + r.uniform(0, 1)) * std::ldexp(1.0, r.integer(lo, hi));
}

// One special or boundary pattern of f: Inf, NaN, signed zero, subnormal, largest finite.
std::uint32_t special_pattern(TileRandom& r, const Format& f) {
    const std::uint32_t sign = r.chance(0.5) ? static_cast<std::uint32_t>(sign_mask(f)) : 0;
    switch (r.integer(0, 4)) {
        case 0:
            return has_inf(f) ? sign | static_cast<std::uint32_t>(exponent_field_max(f) << f.man_bits) : sign | 0x1;
        case 1:
            return static_cast<std::uint32_t>(canonical_nan_bits(f)) | sign;
        case 2:
            return sign;
        case 3:
            return sign | static_cast<std::uint32_t>(1 + r.bits() % fraction_mask(f));
        default:
            return sign | static_cast<std::uint32_t>(max_finite_bits(f));
    }
}

// An element of an input or accumulator in distribution `dist` (attention_pv and cancel are
// built per tile below).
std::uint32_t element(TileRandom& r, const Format& f, int dist) {
    const int lo = emin(f), hi = element_emax(f);
    switch (dist) {
        case 0:
            return encode(f, r.integer(-4, 4));
        case 2:
            return encode(f, binade_value(r, std::max(lo, -20), std::min(hi, 20)));
        case 4:
            return encode(f, binade_value(r, lo - f.man_bits, lo + 2));
        case 5:
            return encode(f, binade_value(r, hi - 3, hi));
        case 6:
            return r.chance(0.3) ? special_pattern(r, f) : encode(f, r.gauss());
        case 9:
            return r.chance(0.5) ? static_cast<std::uint32_t>(r.bits() % (fraction_mask(f) + 1)) |
                                       (r.chance(0.5) ? static_cast<std::uint32_t>(sign_mask(f)) : 0)
                                 : encode(f, binade_value(r, lo, lo + 4));
        default:
            return encode(f, r.gauss());
    }
}

}  // namespace

std::string tile_distribution_metadata() {
    std::string out;
    for (std::size_t i = 0; i < tile_distributions.size(); ++i) {
        out += fmt::format("{}{}={}", i == 0 ? "" : ",", i, tile_distributions[i]);
    }
    return out;
}

MmaTiles generate_mma_tiles(const MmaModel& model, std::int64_t m, std::int64_t n, std::int64_t k,
                            std::int64_t per_distribution, std::uint64_t seed) {
    MmaTiles t;
    t.m = m, t.n = n, t.k = k;
    t.tiles = per_distribution * static_cast<std::int64_t>(tile_distributions.size());
    const Format& fa = model.a;
    const Format& fb = model.b;
    const Format& fc = model.accumulator;
    for (int dist = 0; dist < static_cast<int>(tile_distributions.size()); ++dist) {
        for (std::int64_t tile = 0; tile < per_distribution; ++tile) {
            TileRandom r(seed * 1000003 + static_cast<std::uint64_t>(dist) * 65537 + static_cast<std::uint64_t>(tile));
            t.dist.push_back(static_cast<std::uint8_t>(dist));
            std::vector<double> av(static_cast<std::size_t>(m * k)), bv(static_cast<std::size_t>(k * n));
            std::vector<std::uint32_t> a(av.size()), b(bv.size()), c(static_cast<std::size_t>(m * n));
            for (auto& x : a) x = element(r, fa, dist);
            for (auto& x : b) x = element(r, fb, dist);
            for (auto& x : c) x = element(r, fc, dist == 5 ? 1 : dist);  // huge C would hide the products
            if (dist == 3) {
                // Two large products that cancel (columns 0 and 1 of A opposite, rows 0 and 1 of B
                // equal), small ones elsewhere, and C at the scale of the small ones.
                for (std::int64_t i = 0; i < m; ++i) {
                    const double big = binade_value(r, 4, 6);
                    a[i * k + 0] = encode(fa, big);
                    a[i * k + 1] = encode(fa, -big);
                    for (std::int64_t kk = 2; kk < k; ++kk) a[i * k + kk] = encode(fa, std::ldexp(r.gauss(), -6));
                }
                for (std::int64_t j = 0; j < n; ++j) {
                    b[j] = b[n + j] = encode(fb, binade_value(r, 2, 4));
                    for (std::int64_t kk = 2; kk < k; ++kk) b[kk * n + j] = encode(fb, std::ldexp(r.gauss(), -6));
                }
                for (auto& x : c) x = encode(fc, std::ldexp(r.gauss(), -10));
            } else if (dist == 7) {
                // One dominant product per row, the others 8 to 30 binades below it.
                for (std::int64_t i = 0; i < m; ++i) {
                    const std::int64_t top = r.integer(0, static_cast<int>(k) - 1);
                    for (std::int64_t kk = 0; kk < k; ++kk) {
                        a[i * k + kk] = encode(fa, kk == top ? binade_value(r, 3, 5) : binade_value(r, -15, -4));
                    }
                }
                for (auto& x : b) x = encode(fb, binade_value(r, 0, 2));
                for (auto& x : c) x = encode(fc, binade_value(r, -20, 6));
            } else if (dist == 8) {
                // P in [0, 1] with some entries exactly 1 (a row's maximum), V mostly negative.
                for (std::int64_t i = 0; i < m; ++i) {
                    for (std::int64_t kk = 0; kk < k; ++kk)
                        a[i * k + kk] = encode(fa, std::exp(-std::abs(3 * r.gauss())));
                    a[i * k + r.integer(0, static_cast<int>(k) - 1)] = encode(fa, 1.0);
                }
                for (std::int64_t kk = 0; kk < k; ++kk) {
                    for (std::int64_t j = 0; j < n; ++j) b[kk * n + j] = encode(fb, r.gauss() - (j % 4 == 3 ? 0 : 1.5));
                }
                for (auto& x : c) x = encode(fc, -std::abs(r.gauss()) * k / 4);
            }
            t.a.insert(t.a.end(), a.begin(), a.end());
            t.b.insert(t.b.end(), b.begin(), b.end());
            t.c.insert(t.c.end(), c.begin(), c.end());
        }
    }
    return t;
}

}  // namespace roundscope::emu
