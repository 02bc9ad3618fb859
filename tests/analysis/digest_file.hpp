#pragma once
// A conversion-digest golden file in memory: the GPU's 256 chunk digests of f32 -> e4m3, as the
// golden tests build it.
#include <cstdint>
#include <vector>

#include "lib/tensor.hpp"

namespace roundscope::test {

inline TensorFile digest_file(const std::vector<std::uint64_t>& digests) {
    return {"conversions.safetensors", {}, {Tensor::of_bits("e4m3_gpu", DType::u64, {digests.size()}, digests)}};
}

}  // namespace roundscope::test
