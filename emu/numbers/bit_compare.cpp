#include "emu/numbers/bit_compare.hpp"

#include <algorithm>
#include <limits>

#include "emu/numbers/format.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu {
namespace {

// The encodings of f in value order: negative ones mirrored below the positive ones.
std::int64_t ordered(const Format& f, std::uint32_t bits) {
    const auto magnitude = static_cast<std::int64_t>(bits & static_cast<std::uint32_t>(magnitude_mask(f)));
    const bool negative = f.is_signed && (bits & static_cast<std::uint32_t>(sign_mask(f))) != 0;
    return negative ? -magnitude - 1 : magnitude;
}

}  // namespace

std::uint64_t ulp_distance(const Format& f, std::uint32_t a, std::uint32_t b) {
    if (a == b) return 0;
    if (is_nan_bits(f, a) || is_nan_bits(f, b)) return std::numeric_limits<std::uint64_t>::max();
    const std::int64_t x = ordered(f, a), y = ordered(f, b);
    return static_cast<std::uint64_t>(x > y ? x - y : y - x);
}

BitComparison compare_bits(const std::vector<std::uint32_t>& expected, const std::vector<std::uint32_t>& got,
                           const Format& f) {
    BitComparison c;
    c.total = std::max(expected.size(), got.size());
    for (std::size_t i = 0; i < c.total; ++i) {
        if (i < expected.size() && i < got.size() && expected[i] == got[i]) {
            ++c.matched;
            continue;
        }
        if (!c.first_mismatch) c.first_mismatch = i;
        const std::uint64_t d = i < expected.size() && i < got.size() ? ulp_distance(f, expected[i], got[i])
                                                                      : std::numeric_limits<std::uint64_t>::max();
        c.max_ulp = std::max(c.max_ulp, d);
    }
    return c;
}

BitComparison compare_bits(const std::vector<float>& expected, const std::vector<float>& got) {
    std::vector<std::uint32_t> x(expected.size()), y(got.size());
    std::transform(expected.begin(), expected.end(), x.begin(), [](float v) { return bits_of(v); });
    std::transform(got.begin(), got.end(), y.begin(), [](float v) { return bits_of(v); });
    return compare_bits(x, y, f32);
}

}  // namespace roundscope::emu
