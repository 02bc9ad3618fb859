#pragma once
// Runs a check over all 2^32 float32 bit patterns, in fixed chunks on every core, and gathers
// mismatches (count and the first few) for one REQUIRE at the end.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "lib/parallel.hpp"

namespace roundscope::test {

struct Mismatches {
    std::uint64_t count = 0;
    std::vector<std::string> first;  // up to 8 descriptions
    std::mutex mutex;

    void add(std::uint64_t n, const std::vector<std::string>& examples) {
        std::lock_guard<std::mutex> lock(mutex);
        count += n;
        for (const auto& e : examples)
            if (first.size() < 8) first.push_back(e);
    }
    std::string report() const {
        std::string s = std::to_string(count) + " mismatches";
        for (const auto& e : first) s += "\n  " + e;
        return s;
    }
};

/// Calls chunk(first_bits, count, mismatches) for consecutive chunks covering [0, 2^32).
template <class Chunk>
void for_all_float32(Chunk&& chunk, Mismatches& mismatches) {
    constexpr std::uint64_t chunk_size = 1 << 16;
    constexpr std::uint64_t total = std::uint64_t{1} << 32;
    parallel_for(total / chunk_size, 1, 0, [&](std::size_t begin, std::size_t end) {
        for (std::size_t c = begin; c < end; ++c) chunk(static_cast<std::uint32_t>(c * chunk_size), chunk_size, mismatches);
    });
}

}  // namespace roundscope::test
