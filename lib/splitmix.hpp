#pragma once
// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA
// 2014): the i-th output of the generator seeded with `seed`. Used to derive independent,
// reproducible seeds from a seed and an index (a head, an operand, a tile).
#include <cstdint>

namespace roundscope {

constexpr std::uint64_t splitmix64(std::uint64_t seed, std::uint64_t i) {
    std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace roundscope
