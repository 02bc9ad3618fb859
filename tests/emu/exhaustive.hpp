#pragma once
// Runs a check over all 2^32 float32 bit patterns, in fixed chunks on every core, and gathers
// mismatches (count and the first few) for one REQUIRE at the end.
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/core.h>

#include "emu/batch/batch_cast.hpp"
#include "lib/bits.hpp"
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
        for (std::size_t c = begin; c < end; ++c)
            chunk(static_cast<std::uint32_t>(c * chunk_size), chunk_size, mismatches);
    });
}

/// Over all 2^32 float32 inputs, in chunks of 2^16 cast with options_for(first input of the
/// chunk): the batch cast and, for each element, scalar(x, options, index) both equal
/// want(x, options, index) (pass nullptr as `scalar` when want is the scalar routine itself).
/// Adds what differs to `mismatches`.
template <class Bits, class OptionsFor, class Want, class Scalar>
void check_all_float32(const emu::Format& f, OptionsFor options_for, Want want, Scalar scalar, Mismatches& mismatches) {
    // flatten: the reference routine is inlined with the format and the element loop in view, so
    // the compiler specializes it as it would for a caller with a fixed format (2-3x faster).
    for_all_float32(
        [&](std::uint32_t first, std::uint64_t n, Mismatches & mm) __attribute__((flatten)) {
            const emu::CastOptions o = options_for(first);
            std::vector<float> in(n);
            std::vector<Bits> batch(n);
            for (std::uint64_t i = 0; i < n; ++i) in[i] = float_from_bits(first + static_cast<std::uint32_t>(i));
            emu::cast_batch(std::span<const float>(in), f, o, std::span<Bits>(batch), {first, 1});
            std::uint64_t bad = 0;
            std::vector<std::string> examples;
            for (std::uint64_t i = 0; i < n; ++i) {
                const std::uint64_t w = want(in[i], o, first + i);
                std::uint64_t s = w;
                if constexpr (!std::is_null_pointer_v<Scalar>) s = scalar(in[i], o, first + i);
                if ((s != w || batch[i] != w) && ++bad <= 2)
                    examples.push_back(fmt::format("x=0x{:08x} {}: expected 0x{:x} scalar 0x{:x} batch 0x{:x}",
                                                   first + i, emu::rounding_mode_name(o), w, s, batch[i]));
            }
            if (bad) mm.add(bad, examples);
        },
        mismatches);
}

}  // namespace roundscope::test
