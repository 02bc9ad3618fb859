#include "emu/batch/batch_cast.hpp"

#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "emu/batch/batch_cast_simd.hpp"
#include "emu/numbers/round.hpp"
#include "lib/error.hpp"
#include "lib/parallel.hpp"
#include "lib/philox_batch.hpp"

namespace roundscope::emu {
namespace {

// Does the SIMD kernel serve casts from float32 into `to`? (Otherwise a threaded scalar loop.)
bool has_simd_cast(const Format& to) {
    switch (to.encoding) {
        case Encoding::ieee:
        case Encoding::fn:
        case Encoding::fnuz:
        case Encoding::finite:
            return to.is_signed && to.bits <= 32 && emin(to) >= -126;
        default:
            return false;
    }
}

// Chunks of this many elements are the unit of threading; a chunk's random words fit in L1.
constexpr std::size_t chunk_elements = 8192;

template <class Bits>
void check_output(const Format& to, std::size_t in_size, std::size_t out_size) {
    if (static_cast<int>(sizeof(Bits)) < storage_bytes(to))
        throw Error("batch cast to " + std::string(to.name) + ": output elements of " + std::to_string(sizeof(Bits)) +
                    " bytes cannot hold " + std::to_string(to.bits) + "-bit patterns");
    if (in_size != out_size)
        throw Error("batch cast to " + std::string(to.name) + ": " + std::to_string(in_size) + " inputs but " +
                    std::to_string(out_size) + " outputs");
}

template <class Real, class Bits>
void cast_impl(std::span<const Real> in, const Format& to, const CastOptions& o, std::span<Bits> out, BatchSpec b) {
    check_output<Bits>(to, in.size(), out.size());
    const bool simd = has_simd_cast(to) && sizeof(Bits) <= 4;
    const bool random = !is_deterministic(o.mode);
    parallel_for(in.size(), chunk_elements, b.threads, [&](std::size_t begin, std::size_t end) {
        const std::uint64_t first = b.first_index + begin;
        if (!simd) {
            for (std::size_t i = begin; i < end; ++i)
                out[i] = static_cast<Bits>(
                    convert(std::is_same_v<Real, float> ? f32 : f64, bits_of(in[i]), to, o, b.first_index + i));
            return;
        }
        if constexpr (sizeof(Bits) <= 4) {
            thread_local std::vector<std::uint32_t> words;
            if (random) {
                words.resize(end - begin);
                philox_words(o.seed, first, end - begin, 0, words.data());
            }
            simd_cast(SimdCastJob{&to, &o}, in.data() + begin, random ? words.data() : nullptr, out.data() + begin,
                      end - begin, first);
        }
    });
}

// One table of every value per format and type (256 or 65536 entries), built on first use
// and kept: decoding is then a gather, cheap even for short spans.
template <class Real>
const std::vector<Real>& value_table(const Format& from, std::size_t entries) {
    static std::mutex mutex;
    static std::map<std::string_view, std::vector<Real>> tables;  // nodes never move
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<Real>& table = tables[from.name];
    if (table.empty()) {
        table.resize(entries);
        for (std::size_t u = 0; u < entries; ++u) table[u] = static_cast<Real>(decode(from, u));
    }
    return table;
}

template <class Bits, class Real>
void decode_impl(const Format& from, std::span<const Bits> in, std::span<Real> out, int threads) {
    if (in.size() != out.size())
        throw Error("decode from " + std::string(from.name) + ": " + std::to_string(in.size()) + " inputs but " +
                    std::to_string(out.size()) + " outputs");
    if (static_cast<int>(sizeof(Bits)) != storage_bytes(from))
        throw Error("decode from " + std::string(from.name) + ": inputs of " + std::to_string(sizeof(Bits)) +
                    " bytes, the format is stored in " + std::to_string(storage_bytes(from)));
    const std::vector<Real>& table = value_table<Real>(from, std::size_t{1} << (8 * sizeof(Bits)));
    parallel_for(in.size(), 1 << 16, threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) out[i] = table[in[i]];
    });
}

}  // namespace

template <class Real, class Bits>
void cast_batch(std::span<const Real> in, const Format& to, const CastOptions& o, std::span<Bits> out, BatchSpec b) {
    cast_impl(in, to, o, out, b);
}

template <class Bits, class Real>
void decode_batch(const Format& from, std::span<const Bits> in, std::span<Real> out, int threads) {
    decode_impl(from, in, out, threads);
}

template void cast_batch(std::span<const float>, const Format&, const CastOptions&, std::span<std::uint8_t>, BatchSpec);
template void cast_batch(std::span<const float>, const Format&, const CastOptions&, std::span<std::uint16_t>,
                         BatchSpec);
template void cast_batch(std::span<const float>, const Format&, const CastOptions&, std::span<std::uint32_t>,
                         BatchSpec);
template void cast_batch(std::span<const float>, const Format&, const CastOptions&, std::span<std::uint64_t>,
                         BatchSpec);
template void cast_batch(std::span<const double>, const Format&, const CastOptions&, std::span<std::uint8_t>,
                         BatchSpec);
template void cast_batch(std::span<const double>, const Format&, const CastOptions&, std::span<std::uint16_t>,
                         BatchSpec);
template void cast_batch(std::span<const double>, const Format&, const CastOptions&, std::span<std::uint32_t>,
                         BatchSpec);
template void cast_batch(std::span<const double>, const Format&, const CastOptions&, std::span<std::uint64_t>,
                         BatchSpec);
template void decode_batch(const Format&, std::span<const std::uint8_t>, std::span<float>, int);
template void decode_batch(const Format&, std::span<const std::uint16_t>, std::span<float>, int);
template void decode_batch(const Format&, std::span<const std::uint8_t>, std::span<double>, int);
template void decode_batch(const Format&, std::span<const std::uint16_t>, std::span<double>, int);

}  // namespace roundscope::emu
