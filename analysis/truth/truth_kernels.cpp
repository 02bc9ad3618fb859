// Vector forms of score_sums and weighted_sums (truth_kernels.hpp). Lanes run across
// independent sums, so each sum's arithmetic is exactly the scalar Sum2's, whatever the
// vector width or the number of vectors run side by side: the bounds of the header hold lane
// by lane, and the tails use the same code on single lanes.
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

// G vectors of sums side by side: independent chains, so that the latency of one three-level
// sum hides behind the others (each lane's operations and their order are unchanged).
template <int G, class D>
HWY_INLINE void score_lanes(D d, const double* q, const double* kt, std::size_t stride, std::size_t j, std::size_t dims,
                            double* sum, double* c1, double* c2, double* magnitude) {
    using V = hn::Vec<D>;
    const std::size_t lanes = hn::Lanes(d);
    V s[G], k1[G], k2[G], m[G];
    for (int g = 0; g < G; ++g) s[g] = k1[g] = k2[g] = m[g] = hn::Zero(d);
    for (std::size_t k = 0; k < dims; ++k) {
        const V qk = hn::Set(d, q[k]);
        for (int g = 0; g < G; ++g) {
            const V p = hn::Mul(qk, hn::LoadU(d, kt + k * stride + j + g * lanes));
            add3(d, p, s[g], k1[g], k2[g]);
            m[g] = hn::Add(m[g], hn::Abs(p));
        }
    }
    for (int g = 0; g < G; ++g) {
        hn::StoreU(s[g], d, sum + j + g * lanes);
        hn::StoreU(k1[g], d, c1 + j + g * lanes);
        hn::StoreU(k2[g], d, c2 + j + g * lanes);
        hn::StoreU(m[g], d, magnitude + j + g * lanes);
    }
}

constexpr int chains = 4;

void ScoreSums(const double* q, const double* kt, std::size_t stride, std::size_t n, std::size_t dims, double* sum,
               double* c1, double* c2, double* magnitude) {
    const hn::ScalableTag<double> d;
    const std::size_t lanes = hn::Lanes(d);
    std::size_t j = 0;
    for (; j + chains * lanes <= n; j += chains * lanes)
        score_lanes<chains>(d, q, kt, stride, j, dims, sum, c1, c2, magnitude);
    for (; j + lanes <= n; j += lanes) score_lanes<1>(d, q, kt, stride, j, dims, sum, c1, c2, magnitude);
    const hn::CappedTag<double, 1> d1;
    for (; j < n; ++j) score_lanes<1>(d1, q, kt, stride, j, dims, sum, c1, c2, magnitude);
}

template <int G, class D>
HWY_INLINE void weighted_lanes(D d, const double* e_hi, const double* e_lo, const double* weight, const double* v,
                               std::size_t n, std::size_t dv, std::size_t c, double* sum, double* c1, double* c2,
                               double* weighted) {
    using V = hn::Vec<D>;
    const std::size_t lanes = hn::Lanes(d);
    V s[G], k1[G], k2[G], w[G];
    for (int g = 0; g < G; ++g) s[g] = k1[g] = k2[g] = w[g] = hn::Zero(d);
    for (std::size_t j = 0; j < n; ++j) {
        const V lo = hn::Set(d, e_lo[j]), weight_j = hn::Set(d, weight[j]);
#if HWY_NATIVE_FMA
        const V hi = hn::Set(d, e_hi[j]);
#else
        const double t = e_hi[j] * 134217729.0;
        const double high = t - (t - e_hi[j]);
        const V split_hi = hn::Set(d, high), split_lo = hn::Set(d, e_hi[j] - high);
#endif
        for (int g = 0; g < G; ++g) {
            const V x = hn::LoadU(d, v + j * dv + c + g * lanes);
#if HWY_NATIVE_FMA
            // e_hi x = p + (e_hi x - p) exactly: the error of the rounded product by a fused
            // multiply-subtract; p enters the three levels, the error goes to the last one.
            const V p = hn::Mul(hi, x);
            add3(d, p, s[g], k1[g], k2[g]);
            k2[g] = hn::Add(k2[g], hn::MulSub(hi, x, p));
#else
            // Without a fused multiply-add: Veltkamp's split of e_hi into two halves of 26 bits,
            // each product with x exact (2^27 + 1 is the splitter).
            add3(d, hn::Mul(split_hi, x), s[g], k1[g], k2[g]);
            add3(d, hn::Mul(split_lo, x), s[g], k1[g], k2[g]);
#endif
            k2[g] = hn::Add(k2[g], hn::Mul(lo, x));               // rounded once, summed plainly
            w[g] = hn::Add(w[g], hn::Mul(weight_j, hn::Abs(x)));  // not fused: the same bits on every target
        }
    }
    for (int g = 0; g < G; ++g) {
        hn::StoreU(s[g], d, sum + c + g * lanes);
        hn::StoreU(k1[g], d, c1 + c + g * lanes);
        hn::StoreU(k2[g], d, c2 + c + g * lanes);
        hn::StoreU(w[g], d, weighted + c + g * lanes);
    }
}

void WeightedSums(const double* e_hi, const double* e_lo, const double* weight, const double* v, std::size_t n,
                  std::size_t dv, double* sum, double* c1, double* c2, double* weighted) {
    const hn::ScalableTag<double> d;
    const std::size_t lanes = hn::Lanes(d);
    std::size_t c = 0;
    for (; c + chains * lanes <= dv; c += chains * lanes)
        weighted_lanes<chains>(d, e_hi, e_lo, weight, v, n, dv, c, sum, c1, c2, weighted);
    for (; c + lanes <= dv; c += lanes) weighted_lanes<1>(d, e_hi, e_lo, weight, v, n, dv, c, sum, c1, c2, weighted);
    const hn::CappedTag<double, 1> d1;
    for (; c < dv; ++c) weighted_lanes<1>(d1, e_hi, e_lo, weight, v, n, dv, c, sum, c1, c2, weighted);
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
