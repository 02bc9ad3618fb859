#pragma once
// Tensors of every dtype filled with random valid bit patterns, for round-trip tests.
#include <cstdint>
#include <random>

#include "lib/tensor.hpp"

namespace roundscope::test {

inline Tensor random_tensor(std::string name, DType dtype, Shape shape, std::uint64_t seed) {
    Tensor t = Tensor::zeros(std::move(name), dtype, std::move(shape));
    std::mt19937_64 rng(seed);
    const int bits = info(dtype).value_bits;
    for (std::uint64_t i = 0; i < t.size(); ++i) {
        std::uint64_t v = rng();
        if (bits < 64) v &= (std::uint64_t{1} << bits) - 1;
        if (dtype == DType::boolean) v &= 1;
        t.set_bits_at(i, v);
    }
    return t;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
    return a.name() == b.name() && a.dtype() == b.dtype() && a.shape() == b.shape() &&
           std::equal(a.bytes().begin(), a.bytes().end(), b.bytes().begin(), b.bytes().end());
}

}  // namespace roundscope::test
