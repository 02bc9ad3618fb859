// Property: the SIMD, multi-threaded batch casts equal the scalar routine, for every format and
// mode (the exhaustive tests cover all 2^32 float32 inputs for the main formats).
#include <catch2/catch.hpp>

#include <fmt/core.h>

#include <vector>

#include "emu/batch/batch_cast.hpp"
#include "emu/numbers/round.hpp"
#include "lib/error.hpp"
#include "tests/emu/numbers/cast_inputs.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

constexpr const char* all_modes[] = {"rne", "rna", "rtz", "up", "down", "odd", "sr", "sr:1", "sr:7", "sr:23"};

template <class Bits, class Real>
void check_batch_equals_scalar(const Format& f, const std::vector<Real>& in, const CastOptions& o) {
    std::vector<Bits> out(in.size());
    cast_batch(std::span<const Real>(in), f, o, std::span<Bits>(out), {1000, 2});
    for (std::size_t i = 0; i < in.size(); ++i) {
        const std::uint64_t want = std::is_same_v<Real, float>
                                       ? cast_from_f32(static_cast<float>(in[i]), f, o, 1000 + i)
                                       : cast_from_f64(static_cast<double>(in[i]), f, o, 1000 + i);
        if (out[i] != want)
            FAIL(fmt::format("{} {} x={:a}: batch 0x{:x} scalar 0x{:x}", f.name, rounding_mode_name(o),
                             static_cast<double>(in[i]), out[i], want));
    }
}

template <class Bits>
void check_format(const Format& f) {
    const std::vector<test::CastInput> inputs = test::cast_inputs(f, 200'000, 99);
    std::vector<float> floats;
    std::vector<double> doubles;
    for (const auto& x : inputs) {
        (x.from_f32 ? floats.push_back(static_cast<float>(x.x)) : doubles.push_back(x.x));
    }
    for (const char* mode : all_modes) {
        for (int variant = 0; variant < 4; ++variant) {
            CastOptions o = convention_options(static_cast<Convention>(variant), f);
            parse_rounding_mode(mode, o);
            o.saturate = variant & 1;
            o.flush_input = variant == 1;
            o.flush_output = variant == 2;
            o.seed = 1234 + variant;
            check_batch_equals_scalar<Bits>(f, floats, o);
            check_batch_equals_scalar<Bits>(f, doubles, o);
        }
    }
}

}  // namespace

TEST_CASE("batch casts equal the scalar routine for every format, mode and option set", "[batch]") {
    for (const Format& f : all_formats) {
        DYNAMIC_SECTION(f.name) {
            switch (storage_bytes(f)) {
                case 1:
                    check_format<std::uint8_t>(f);
                    break;
                case 2:
                    check_format<std::uint16_t>(f);
                    break;
                case 4:
                    check_format<std::uint32_t>(f);
                    break;
                default:
                    check_format<std::uint64_t>(f);
                    break;
            }
        }
    }
}

TEST_CASE("batch decode equals scalar decode for every pattern of 8- and 16-bit formats", "[batch]") {
    for (const Format& f : all_formats) {
        if (f.bits > 16) continue;
        DYNAMIC_SECTION(f.name) {
            const std::size_t n = std::size_t{1} << (8 * storage_bytes(f));
            auto check = [&](auto bits_type) {
                using Bits = decltype(bits_type);
                std::vector<Bits> in(n);
                for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<Bits>(i);
                std::vector<double> d(n);
                std::vector<float> fl(n);
                decode_batch(f, std::span<const Bits>(in), std::span<double>(d));
                decode_batch(f, std::span<const Bits>(in), std::span<float>(fl));
                for (std::size_t i = 0; i < n; ++i) {
                    const double want = decode(f, i);
                    REQUIRE((std::bit_cast<std::uint64_t>(d[i]) == std::bit_cast<std::uint64_t>(want) ||
                             (std::isnan(d[i]) && std::isnan(want))));
                    REQUIRE((fl[i] == static_cast<float>(want) || (std::isnan(fl[i]) && std::isnan(want))));
                }
            };
            if (storage_bytes(f) == 1)
                check(std::uint8_t{});
            else
                check(std::uint16_t{});
        }
    }
}

TEST_CASE("batch casts reject outputs too narrow or of the wrong length", "[batch]") {
    std::vector<float> in(4);
    std::vector<std::uint8_t> narrow(4), short_out(3);
    CHECK_THROWS_AS(cast_batch(std::span<const float>(in), bf16, CastOptions{}, std::span<std::uint8_t>(narrow)),
                    Error);
    CHECK_THROWS_AS(cast_batch(std::span<const float>(in), e4m3, CastOptions{}, std::span<std::uint8_t>(short_out)),
                    Error);
}
