// dd::exp over many balls (double_double.hpp), on vectors (Highway, runtime dispatch). Each
// lane performs exactly the scalar dd::exp's operations in its order (two_prod's fused
// multiply-subtract, the fused products of mul, the same association of every radius), so
// the bits equal the scalar ones on every target; a target without a fused multiply-add runs
// the scalar function.
#include "analysis/truth/double_double.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "analysis/truth/double_double_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

static_assert(sizeof(roundscope::analysis::dd::Ball) == 3 * sizeof(double), "a ball is hi, lo, r: gathered as such");

HWY_BEFORE_NAMESPACE();
namespace roundscope::analysis::dd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_NATIVE_FMA
template <class V>
struct VBall {
    V hi, lo, r;
};

template <class D>
VBall<hn::Vec<D>> splat(D d, const Ball& x) {
    return {hn::Set(d, x.v.hi), hn::Set(d, x.v.lo), hn::Set(d, x.r)};
}

template <class V>
HWY_INLINE void two_sum(V a, V b, V& s, V& e) {
    s = hn::Add(a, b);
    const V bb = hn::Sub(s, a);
    e = hn::Add(hn::Sub(a, hn::Sub(s, bb)), hn::Sub(b, bb));
}
template <class V>
HWY_INLINE void fast_two_sum(V a, V b, V& s, V& e) {
    s = hn::Add(a, b);
    e = hn::Sub(b, hn::Sub(s, a));
}
template <class V>
HWY_INLINE V magnitude(const VBall<V>& x) {
    return hn::Add(hn::Abs(x.hi), hn::Abs(x.lo));
}
template <class D, class V = hn::Vec<D>>
HWY_INLINE V up(D d, V r) {
    return hn::Mul(r, hn::Set(d, 1 + 0x1p-48));
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE VBall<V> add(D d, const VBall<V>& x, const VBall<V>& y) {
    V sh, sl, th, tl, v1h, v1l;
    two_sum(x.hi, y.hi, sh, sl);
    two_sum(x.lo, y.lo, th, tl);
    fast_two_sum(sh, hn::Add(sl, th), v1h, v1l);
    VBall<V> out;
    fast_two_sum(v1h, hn::Add(tl, v1l), out.hi, out.lo);
    const V bound = hn::Mul(hn::Set(d, 5 * u * u), hn::Add(magnitude(x), magnitude(y)));
    out.r = up(d, hn::Add(hn::Add(x.r, y.r), bound));
    return out;
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE VBall<V> mul(D d, const VBall<V>& x, const VBall<V>& y) {
    const V ch = hn::Mul(x.hi, y.hi), cl = hn::MulSub(x.hi, y.hi, ch);
    const V cl2 = hn::MulAdd(x.lo, y.hi, hn::MulAdd(x.hi, y.lo, hn::Mul(x.lo, y.lo)));
    VBall<V> out;
    fast_two_sum(ch, hn::Add(cl, cl2), out.hi, out.lo);
    const V mx = magnitude(x), my = magnitude(y);
    const V radii = hn::Add(hn::Add(hn::Mul(mx, y.r), hn::Mul(my, x.r)), hn::Mul(x.r, y.r));
    out.r = up(d, hn::Add(radii, hn::Mul(hn::Mul(hn::Set(d, 16 * u * u), mx), my)));
    return out;
}

// A constant ball times a vector of doubles (dd::mul(Ball, double)).
template <class D, class V = hn::Vec<D>>
HWY_INLINE VBall<V> mul(D d, const Ball& x, V y) {
    const V xh = hn::Set(d, x.v.hi);
    const V ch = hn::Mul(xh, y), cl = hn::MulSub(xh, y, ch);
    V th, tl;
    fast_two_sum(ch, hn::Mul(hn::Set(d, x.v.lo), y), th, tl);
    VBall<V> out;
    fast_two_sum(th, hn::Add(tl, cl), out.hi, out.lo);
    const V my = hn::Abs(y);
    const V bound = hn::Mul(hn::Set(d, 4 * u * u * magnitude(x.v)), my);
    out.r = up(d, hn::Add(hn::Mul(my, hn::Set(d, x.r)), bound));
    return out;
}

template <class D>
HWY_INLINE void exp_lanes(D d, const ExpTables& c, const double* hi, const double* lo, const double* rad, double* o_hi,
                          double* o_lo, double* o_r) {
    using V = hn::Vec<D>;
    const hn::RebindToSigned<D> di;
    const VBall<V> x{hn::LoadU(d, hi), hn::LoadU(d, lo), hn::LoadU(d, rad)};
    const V k = hn::Round(hn::Mul(x.hi, hn::Set(d, 1024 * 1.4426950408889634)));
    VBall<V> kl = mul(d, c.ln2_over_table, k);
    kl.hi = hn::Neg(kl.hi), kl.lo = hn::Neg(kl.lo);
    const VBall<V> r = add(d, x, kl);
    VBall<V> p = splat(d, c.inverse_factorial[8]);
    for (int j = 7; j >= 0; --j) p = add(d, mul(d, p, r), splat(d, c.inverse_factorial[static_cast<std::size_t>(j)]));
    const V rmax = up(d, hn::Add(magnitude(r), r.r));
    const V r3 = hn::Mul(hn::Mul(rmax, rmax), rmax);
    const V remainder = hn::Div(hn::Mul(hn::Set(d, 2.0), hn::Mul(hn::Mul(r3, r3), r3)), hn::Set(d, 362880.0));
    p.r = up(d, hn::Add(p.r, hn::Mul(remainder, hn::Set(d, 1 + 0x1p-40))));
    // k = 1024 m + j with j in [0, 1024): m by an arithmetic shift (a floor), j the low bits.
    const auto ki = hn::ConvertTo(di, k);
    const auto m = hn::ShiftRight<table_bits>(ki);
    const auto j3 = hn::Mul(hn::And(ki, hn::Set(di, (1 << table_bits) - 1)), hn::Set(di, 3));
    const double* table = &c.powers[0].v.hi;  // balls of three doubles: hi, lo, r
    const VBall<V> power{hn::GatherIndex(d, table, j3), hn::GatherIndex(d, table + 1, j3),
                         hn::GatherIndex(d, table + 2, j3)};
    const VBall<V> e = mul(d, p, power);
    // scale2: times 2^m, and the least subnormal into the radius where m < 0.
    const V two_m = hn::BitCast(d, hn::ShiftLeft<52>(hn::Add(m, hn::Set(di, 1023))));
    hn::StoreU(hn::Mul(e.hi, two_m), d, o_hi);
    hn::StoreU(hn::Mul(e.lo, two_m), d, o_lo);
    const V tiny = hn::IfThenElseZero(hn::RebindMask(d, hn::Lt(m, hn::Zero(di))), hn::Set(d, 0x1p-1074));
    hn::StoreU(hn::Add(hn::Mul(e.r, two_m), tiny), d, o_r);
}
#endif

void ExpMany(std::size_t n, const double* hi, const double* lo, const double* r, double* o_hi, double* o_lo,
             double* o_r) {
    std::size_t i = 0;
#if HWY_NATIVE_FMA
    const hn::ScalableTag<double> d;
    const std::size_t lanes = hn::Lanes(d);
    const ExpTables& c = exp_tables();
    for (; i + lanes <= n; i += lanes) exp_lanes(d, c, hi + i, lo + i, r + i, o_hi + i, o_lo + i, o_r + i);
#endif
    for (; i < n; ++i) {
        const Ball e = exp({{hi[i], lo[i]}, r[i]});
        o_hi[i] = e.v.hi, o_lo[i] = e.v.lo, o_r[i] = e.r;
    }
}

}  // namespace roundscope::analysis::dd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace roundscope::analysis::dd {
HWY_EXPORT(ExpMany);

void exp_many(std::size_t n, const double* hi, const double* lo, const double* r, double* out_hi, double* out_lo,
              double* out_r) {
    HWY_DYNAMIC_DISPATCH(ExpMany)(n, hi, lo, r, out_hi, out_lo, out_r);
}

}  // namespace roundscope::analysis::dd
#endif
