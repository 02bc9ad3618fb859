#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "emu/batch/tensor_cast.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "emu/numbers/round.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

// Every bit pattern of a dtype, one element each, and one byte off alignment (as in a file).
struct AllPatterns {
    std::vector<std::byte> storage;
    Tensor t;
    explicit AllPatterns(DType d) {
        const int unit = info(d).storage_bytes, bits = info(d).value_bits;
        const std::uint64_t n = std::uint64_t{1} << bits;
        storage.resize(n * static_cast<std::size_t>(unit) + 1);
        for (std::uint64_t i = 0; i < n; ++i) std::memcpy(storage.data() + 1 + i * unit, &i, unit);  // little endian
        t = Tensor::view("x", d, {n}, std::span<const std::byte>(storage).subspan(1), nullptr);
    }
};

// The element path: each element's exact value rounded on its own, its random stream its index.
std::vector<std::uint64_t> element_by_element(const Tensor& t, const Format& to, const CastOptions& o) {
    std::vector<std::uint64_t> out(t.size());
    for (std::uint64_t i = 0; i < t.size(); ++i) out[i] = round_to_format(to, unpack_element(t, i), o, i);
    return out;
}

std::vector<CastOptions> option_sets() {
    std::vector<CastOptions> sets;
    for (const RoundingMode m : {RoundingMode::nearest_even, RoundingMode::nearest_away, RoundingMode::toward_zero,
                                 RoundingMode::toward_positive, RoundingMode::to_odd, RoundingMode::stochastic_exact,
                                 RoundingMode::stochastic_bits}) {
        CastOptions o;
        o.mode = m, o.sr_bits = m == RoundingMode::stochastic_bits ? 13 : 0, o.seed = 77;
        sets.push_back(o);
    }
    CastOptions s;
    s.saturate = true, s.flush_output = true;
    sets.push_back(s);
    CastOptions daz;
    daz.flush_input = true;
    sets.push_back(daz);
    for (const Convention c : {Convention::torch, Convention::ml_dtypes, Convention::ocp})
        for (const Format& f : {f16, e5m2, e8m0}) sets.push_back(convention_options(c, f));
    CastOptions nan;
    nan.nan_sign = NanSign::keep, nan.nan_payload = NanPayload::truncated, nan.nan_to_finite = NanToFinite::zero;
    sets.push_back(nan);
    return sets;
}

}  // namespace

TEST_CASE(
    "cast_tensor of a float tensor of 16 bits or fewer equals the element path on every pattern, into every "
    "format, under every rounding and NaN option, on one or two threads",
    "[tensor_cast]") {
    const std::vector<CastOptions> options = option_sets();
    for (const DTypeInfo& d : all_dtypes()) {
        if (d.kind != DTypeKind::floating || d.storage_bytes > 2) continue;
        const AllPatterns in(d.dtype);
        for (const Format& to : all_formats) {
            for (std::size_t k = 0; k < options.size(); ++k) {
                const CastOptions& o = options[k];
                const std::vector<std::uint64_t> want = element_by_element(in.t, to, o);
                for (const int threads : {1, 2}) {
                    const Tensor got = cast_tensor(in.t, to, o, 1.0, threads);
                    std::uint64_t wrong = 0, first = 0;
                    for (std::uint64_t i = 0; i < got.size(); ++i)
                        if (got.bits_at(i) != want[i] && wrong++ == 0) first = i;
                    INFO(d.name << " -> " << to.name << ", option set " << k << ", " << threads
                                << " thread(s): first wrong pattern " << first);
                    CHECK(wrong == 0);
                }
            }
        }
    }
}
