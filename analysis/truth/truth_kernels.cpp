// Vector forms of score_sums and weighted_sums (truth_kernels.hpp). Lanes run across
// independent sums, so each sum's arithmetic is exactly the scalar Sum2's, whatever the
// vector width: the bounds of the header hold lane by lane, and the tails use the same code
// on single lanes.
#include "analysis/truth/truth_kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "analysis/truth/truth_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace roundscope::analysis::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// s + t = a + b exactly (Knuth's TwoSum), on any tag (vectors or single lanes).
template <class D, class V>
HWY_INLINE void two_sum(D, V a, V b, V& s, V& t) {
    s = hn::Add(a, b);
    const V bb = hn::Sub(s, a);
    t = hn::Add(hn::Sub(a, hn::Sub(s, bb)), hn::Sub(b, bb));
}

// One term into the three-level sum.
template <class D, class V>
HWY_INLINE void add3(D d, V p, V& s, V& k1, V& k2) {
    V e, f;
    two_sum(d, s, p, s, e);
    two_sum(d, k1, e, k1, f);
    k2 = hn::Add(k2, f);
}

template <class D>
HWY_INLINE void score_lanes(D d, const double* q, const double* kt, std::size_t stride, std::size_t j, std::size_t dims,
                            double* sum, double* c1, double* c2, double* magnitude) {
    using V = hn::Vec<D>;
    V s = hn::Zero(d), k1 = hn::Zero(d), k2 = hn::Zero(d), m = hn::Zero(d);
    for (std::size_t k = 0; k < dims; ++k) {
        const V p = hn::Mul(hn::Set(d, q[k]), hn::LoadU(d, kt + k * stride + j));
        add3(d, p, s, k1, k2);
        m = hn::Add(m, hn::Abs(p));
    }
    hn::StoreU(s, d, sum + j);
    hn::StoreU(k1, d, c1 + j);
    hn::StoreU(k2, d, c2 + j);
    hn::StoreU(m, d, magnitude + j);
}

void ScoreSums(const double* q, const double* kt, std::size_t stride, std::size_t n, std::size_t dims, double* sum,
               double* c1, double* c2, double* magnitude) {
    const hn::ScalableTag<double> d;
    const std::size_t lanes = hn::Lanes(d);
    std::size_t j = 0;
    for (; j + lanes <= n; j += lanes) score_lanes(d, q, kt, stride, j, dims, sum, c1, c2, magnitude);
    const hn::CappedTag<double, 1> d1;
    for (; j < n; ++j) score_lanes(d1, q, kt, stride, j, dims, sum, c1, c2, magnitude);
}

template <class D>
HWY_INLINE void weighted_lanes(D d, const double* e_hi, const double* e_lo, const double* weight, const double* v,
                               std::size_t n, std::size_t dv, std::size_t c, double* sum, double* c1, double* c2,
                               double* weighted) {
    using V = hn::Vec<D>;
    V s = hn::Zero(d), k1 = hn::Zero(d), k2 = hn::Zero(d), w = hn::Zero(d);
    for (std::size_t j = 0; j < n; ++j) {
        const V x = hn::LoadU(d, v + j * dv + c);
#if HWY_NATIVE_FMA
        // e_hi x = p + (e_hi x - p) exactly: the error of the rounded product by a fused
        // multiply-subtract; p enters the three levels, the error goes to the last one.
        const V hi = hn::Set(d, e_hi[j]);
        const V p = hn::Mul(hi, x);
        add3(d, p, s, k1, k2);
        k2 = hn::Add(k2, hn::MulSub(hi, x, p));
#else
        // Without a fused multiply-add: Veltkamp's split of e_hi into two halves of 26 bits,
        // each product with x exact (2^27 + 1 is the splitter).
        const double t = e_hi[j] * 134217729.0;
        const double high = t - (t - e_hi[j]);
        add3(d, hn::Mul(hn::Set(d, high), x), s, k1, k2);
        add3(d, hn::Mul(hn::Set(d, e_hi[j] - high), x), s, k1, k2);
#endif
        k2 = hn::Add(k2, hn::Mul(hn::Set(d, e_lo[j]), x));           // rounded once, summed plainly
        w = hn::Add(w, hn::Mul(hn::Set(d, weight[j]), hn::Abs(x)));  // not fused: the same bits on every target
    }
    hn::StoreU(s, d, sum + c);
    hn::StoreU(k1, d, c1 + c);
    hn::StoreU(k2, d, c2 + c);
    hn::StoreU(w, d, weighted + c);
}

void WeightedSums(const double* e_hi, const double* e_lo, const double* weight, const double* v, std::size_t n,
                  std::size_t dv, double* sum, double* c1, double* c2, double* weighted) {
    const hn::ScalableTag<double> d;
    const std::size_t lanes = hn::Lanes(d);
    std::size_t c = 0;
    for (; c + lanes <= dv; c += lanes) weighted_lanes(d, e_hi, e_lo, weight, v, n, dv, c, sum, c1, c2, weighted);
    const hn::CappedTag<double, 1> d1;
    for (; c < dv; ++c) weighted_lanes(d1, e_hi, e_lo, weight, v, n, dv, c, sum, c1, c2, weighted);
}

}  // namespace roundscope::analysis::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace roundscope::analysis {
HWY_EXPORT(ScoreSums);
HWY_EXPORT(WeightedSums);

void score_sums(const double* q, const double* kt, std::size_t stride, std::size_t n, std::size_t d, double* sum,
                double* c1, double* c2, double* magnitude) {
    HWY_DYNAMIC_DISPATCH(ScoreSums)(q, kt, stride, n, d, sum, c1, c2, magnitude);
}

void weighted_sums(const double* e_hi, const double* e_lo, const double* weight, const double* v, std::size_t n,
                   std::size_t dv, double* sum, double* c1, double* c2, double* weighted) {
    HWY_DYNAMIC_DISPATCH(WeightedSums)(e_hi, e_lo, weight, v, n, dv, sum, c1, c2, weighted);
}

}  // namespace roundscope::analysis
#endif
