#pragma once
// The two loops that carry the fast ground truth's work, on vectors (Highway, runtime
// dispatch): both sum terms exact in double by two-sums in three levels (Ogita, Rump and
// Oishi's SumK with K = 3): (s, e) = TwoSum(s, p); (c1, f) = TwoSum(c1, e); c2 += f. Then
// s + c1 + c2 is the exact sum within gamma_n^3 times the sum of |terms| (each level's errors
// sum to at most gamma_n times the level above).
#include <cstddef>

namespace roundscope::analysis {

/// For j < n: the Sum3 of q[c] * kt[c * stride + j] over c < d, as sum[j] + c1[j] + c2[j],
/// and magnitude[j] = sum of |q[c] kt[c stride + j]| (rounded up by at most (d + 1) u).
/// Requires every product exact (at most 26 significant bits in q and kt).
void score_sums(const double* q, const double* kt, std::size_t stride, std::size_t n, std::size_t d, double* sum,
                double* c1, double* c2, double* magnitude);

/// For c < dv: the Sum3 over j < n of e[j] * v[j * dv + c], where e[j] = e_hi[j] + e_lo[j]:
/// e_hi v as a rounded product in the three levels and its exact error (a fused multiply-
/// subtract; without FMA, e_hi is split in two halves of 26 bits whose products are exact)
/// and e_lo v rounded once, both added to c2 directly. weighted[c] = sum of weight[j]
/// |v[j dv + c]|, computed with at most n + 1 roundings: the caller makes weight[j] the whole
/// error coefficient of term j (e[j]'s radius, the rounding of e_lo v, and its share of the
/// three-level bound), see ball_weighted_sums. Requires v with at most 27 significant bits.
void weighted_sums(const double* e_hi, const double* e_lo, const double* weight, const double* v, std::size_t n,
                   std::size_t dv, double* sum, double* c1, double* c2, double* weighted);

}  // namespace roundscope::analysis
