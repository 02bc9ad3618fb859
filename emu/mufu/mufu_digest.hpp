#pragma once
// The chunk digests of any function of the 2^32 float32 patterns, on the CPU: the same sums the
// GPU probe forms (gpu/probes/mufu_probe.cu), so a model is checked against a capture chunk by chunk.
#include <cstdint>
#include <vector>

#include "emu/batch/conversion_digest.hpp"
#include "emu/mufu/mufu_variant.hpp"
#include "lib/parallel.hpp"

namespace roundscope::emu {

template <class F>
std::vector<std::uint64_t> digests_of(const F& f, int threads) {
    std::vector<std::uint64_t> out(mufu_chunks);
    parallel_for(mufu_chunks, 64, threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t chunk = begin; chunk < end; ++chunk) {
            std::uint64_t sum = 0;
            const auto first = static_cast<std::uint32_t>(chunk << mufu_chunk_bits);
            for (std::uint32_t i = 0; i < (1u << mufu_chunk_bits); ++i) sum += conversion_mix(first + i, f(first + i));
            out[chunk] = sum;
        }
    });
    return out;
}

}  // namespace roundscope::emu
