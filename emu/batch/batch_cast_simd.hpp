#pragma once
// Internal to batch_cast.cpp: the SIMD kernel's entry points (runtime-dispatched by Highway).
#include <cstddef>
#include <cstdint>

#include "emu/numbers/cast_options.hpp"
#include "emu/numbers/format.hpp"

namespace roundscope::emu {

struct SimdCastJob {
    const Format* to;
    const CastOptions* options;
};

/// words[i] = RandomStream{seed, first + i}.word(0) (stochastic modes; may be null otherwise).
void simd_cast(const SimdCastJob& job, const float* in, const std::uint32_t* words, std::uint8_t* out, std::size_t n,
               std::uint64_t first);
void simd_cast(const SimdCastJob& job, const float* in, const std::uint32_t* words, std::uint16_t* out, std::size_t n,
               std::uint64_t first);
void simd_cast(const SimdCastJob& job, const float* in, const std::uint32_t* words, std::uint32_t* out, std::size_t n,
               std::uint64_t first);
void simd_cast(const SimdCastJob& job, const double* in, const std::uint32_t* words, std::uint8_t* out, std::size_t n,
               std::uint64_t first);
void simd_cast(const SimdCastJob& job, const double* in, const std::uint32_t* words, std::uint16_t* out, std::size_t n,
               std::uint64_t first);
void simd_cast(const SimdCastJob& job, const double* in, const std::uint32_t* words, std::uint32_t* out, std::size_t n,
               std::uint64_t first);

}  // namespace roundscope::emu
