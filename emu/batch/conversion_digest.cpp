#include "emu/batch/conversion_digest.hpp"

#include <bit>
#include <span>

#include "emu/batch/batch_cast.hpp"
#include "lib/parallel.hpp"

namespace roundscope::emu {

CastOptions probed_conversion_options(const Format& to) {
    CastOptions options = convention_options(Convention::cuda, to);
    options.saturate = to.bits == 8;
    return options;
}

std::vector<std::uint64_t> emulated_conversion_digests(const Format& to, const CastOptions& options, int threads) {
    constexpr std::uint64_t chunk = (std::uint64_t{1} << 32) / conversion_digest_chunks;
    constexpr std::uint64_t piece = 1 << 16;
    std::vector<std::uint64_t> digests(conversion_digest_chunks, 0);
    parallel_for(conversion_digest_chunks, 1, threads, [&](std::size_t begin, std::size_t end) {
        std::vector<float> in(piece);
        std::vector<std::uint16_t> out(piece);
        for (std::size_t j = begin; j < end; ++j) {
            std::uint64_t sum = 0;
            for (std::uint64_t first = j * chunk; first < (j + 1) * chunk; first += piece) {
                for (std::uint64_t i = 0; i < piece; ++i)
                    in[i] = std::bit_cast<float>(static_cast<std::uint32_t>(first + i));
                cast_batch(std::span<const float>(in), to, options, std::span<std::uint16_t>(out));
                for (std::uint64_t i = 0; i < piece; ++i)
                    sum += conversion_mix(static_cast<std::uint32_t>(first + i), out[i]);
            }
            digests[j] = sum;
        }
    });
    return digests;
}

}  // namespace roundscope::emu
