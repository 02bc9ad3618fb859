#pragma once
// Double-double numbers with a rigorous error radius ("balls"): the arithmetic of the fast
// ground-truth path. A Ball holds an unevaluated sum hi + lo (normalized: |lo| <= ulp(hi) / 2)
// and a radius r with |exact - (hi + lo)| <= r. Every operation adds to r the bound its own
// rounding can cause, from Joldes, Muller and Popescu, "Tight and rigorous error bounds for
// basic building blocks of double-word arithmetic" (ACM TOMS 44, 2017), taken with margin:
//   AccurateDWPlusDW (their Alg. 6)   relative error <= 3u^2 + 13u^3   -> we use 5u^2
//   DWTimesFP1 (Alg. 7)               <= 1.5u^2 + 4u^3                  -> 4u^2
//   DWTimesDW3 (Alg. 12, with FMA)    <= 4u^2                           -> 16u^2
// Radii are computed in double and rounded up by a factor (1 + 2^-48), which covers the few
// roundings of each radius formula.
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace roundscope::analysis::dd {

inline constexpr double u = 0x1p-53;

struct DD {
    double hi = 0, lo = 0;
};

inline DD two_sum(double a, double b) {
    const double s = a + b, bb = s - a;
    return {s, (a - (s - bb)) + (b - bb)};
}
inline DD fast_two_sum(double a, double b) {  // |a| >= |b| or a == 0
    const double s = a + b;
    return {s, b - (s - a)};
}
inline DD two_prod(double a, double b) {
    const double p = a * b;
    return {p, std::fma(a, b, -p)};
}

inline double magnitude(DD x) { return std::fabs(x.hi) + std::fabs(x.lo); }
inline double up(double r) { return r * (1 + 0x1p-48); }

struct Ball {
    DD v;
    double r = 0;
};

inline Ball exact(double x) { return {{x, 0}, 0}; }

inline Ball add(const Ball& x, const Ball& y) {
    const DD s = two_sum(x.v.hi, y.v.hi), t = two_sum(x.v.lo, y.v.lo);
    const DD v1 = fast_two_sum(s.hi, s.lo + t.hi);
    const DD v = fast_two_sum(v1.hi, t.lo + v1.lo);
    return {v, up(x.r + y.r + 5 * u * u * (magnitude(x.v) + magnitude(y.v)))};
}

inline Ball negate(const Ball& x) { return {{-x.v.hi, -x.v.lo}, x.r}; }

inline Ball mul(const Ball& x, const Ball& y) {
    const DD c = two_prod(x.v.hi, y.v.hi);
    const double cl2 = std::fma(x.v.lo, y.v.hi, std::fma(x.v.hi, y.v.lo, x.v.lo * y.v.lo));
    const DD v = fast_two_sum(c.hi, c.lo + cl2);
    const double mx = magnitude(x.v), my = magnitude(y.v);
    return {v, up(mx * y.r + my * x.r + x.r * y.r + 16 * u * u * mx * my)};
}

inline Ball mul(const Ball& x, double y) {
    const DD c = two_prod(x.v.hi, y);
    const DD t = fast_two_sum(c.hi, x.v.lo * y);
    const DD v = fast_two_sum(t.hi, t.lo + c.lo);
    const double my = std::fabs(y);
    return {v, up(my * x.r + 4 * u * u * magnitude(x.v) * my)};
}

/// x * 2^k, exact while hi and lo stay normal; the radius gains the least subnormal in case
/// scaling it down rounded it down.
inline Ball scale2(const Ball& x, int k) {
    const double two_k = std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52);  // k in [-1022, 1023]
    return {{x.v.hi * two_k, x.v.lo * two_k}, x.r * two_k + (k < 0 ? 0x1p-1074 : 0.0)};
}

/// e^x for x in [-600, 700]: x = (1024 m + j) ln2 / 1024 + r, e^x = 2^m 2^(j/1024) e^r with
/// the table 2^(j/1024) from MPFR and e^r a degree-8 Taylor polynomial with its remainder bound.
Ball exp(const Ball& x);

/// exp of the balls {hi[i], lo[i]}, r[i] for i < n into out_*: the same bits as exp, on vectors
/// (double_double_simd.cpp).
void exp_many(std::size_t n, const double* hi, const double* lo, const double* r, double* out_hi, double* out_lo,
              double* out_r);

/// exp's constants, from MPFR once: ln2 / 1024, 2^(j/1024) for j < 1024, and 1/j! for j <= 8.
inline constexpr int table_bits = 10;
struct ExpTables {
    Ball ln2_over_table;
    std::array<Ball, std::size_t{1} << table_bits> powers;
    std::array<Ball, 9> inverse_factorial;
};
const ExpTables& exp_tables();

/// The double nearest every point of the ball, when one double is (strictly) nearest to all
/// of them and it is a normal number, or +0 for the exact zero {0, 0, 0}; otherwise false.
bool round_to_double(const Ball& x, double& out);

}  // namespace roundscope::analysis::dd
