#pragma once
// Many Philox words at once, SIMD: out[i] = RandomStream{seed, first_index + i}.word(k).
#include <cstddef>
#include <cstdint>

namespace roundscope {

void philox_words(std::uint64_t seed, std::uint64_t first_index, std::size_t n, std::uint32_t k, std::uint32_t* out);

}  // namespace roundscope
