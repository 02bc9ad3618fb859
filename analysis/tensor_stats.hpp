#pragma once
// Summary statistics of one tensor, as `roundscope inspect` prints them.
//
// Tensors of 8- and 16-bit elements (bf16, f16, FP8/6/4, small integers) are summarized from a
// histogram of their bit patterns: counting is one pass over the bytes, and the statistics are
// then exact sums over at most 65536 distinct values, done in MPFR, so min, max, mean and the
// fractions are correctly rounded and std is within an ulp. 32- and 64-bit tensors are
// summed in double with compensation (Neumaier), in fixed chunks combined in order. Either
// way the result has the same bits on any number of threads.
#include <array>
#include <cstdint>
#include <optional>

#include "emu/numbers/format.hpp"
#include "lib/tensor.hpp"

namespace roundscope::analysis {

/// The formats whose exact-representability `inspect` reports.
inline constexpr std::array<const emu::Format*, 3> representability_targets{&emu::bf16, &emu::e4m3, &emu::e5m2};

struct TensorStats {
    std::uint64_t count = 0;
    std::uint64_t finite = 0, nan = 0, inf = 0, zeros = 0, subnormals = 0;
    // Over the finite values; empty when there are none. std is the population standard
    // deviation (numpy's default, ddof = 0).
    std::optional<double> min, max, mean, std;
    // Fraction of the finite values that equal a value of each representability target.
    std::array<std::optional<double>, representability_targets.size()> exact_fraction;
};

TensorStats tensor_stats(const Tensor& t, int threads = 0);

}  // namespace roundscope::analysis
