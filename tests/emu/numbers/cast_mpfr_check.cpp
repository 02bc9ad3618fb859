#include "tests/emu/numbers/cast_mpfr_check.hpp"

#include <limits>
#include <mutex>

#include <fmt/core.h>

#include "emu/numbers/round.hpp"
#include "lib/parallel.hpp"
#include "tests/emu/numbers/cast_inputs.hpp"
#include "tests/emu/numbers/mpfr_oracle.hpp"

namespace roundscope::test {

using namespace roundscope::emu;

MpfrCheckResult check_casts_against_mpfr(const Format& f, std::size_t inputs, std::uint64_t seed) {
    const std::vector<CastInput> xs = cast_inputs(f, inputs, seed);
    constexpr RoundingMode modes[] = {RoundingMode::nearest_even,    RoundingMode::nearest_away,
                                      RoundingMode::toward_zero,     RoundingMode::toward_positive,
                                      RoundingMode::toward_negative, RoundingMode::to_odd};
    MpfrCheckResult result;
    std::mutex mutex;
    parallel_for(xs.size(), 4096, 0, [&](std::size_t begin, std::size_t end) {
        std::uint64_t checked = 0, bad = 0;
        std::string first;
        for (std::size_t i = begin; i < end; ++i) {
            const CastInput& in = xs[i];
            const Neighbours n = oracle_neighbours(f, in.x);
            const double source_min_normal = in.from_f32 ? static_cast<double>(std::numeric_limits<float>::min())
                                                         : std::numeric_limits<double>::min();
            for (int combo = 0; combo < 48; ++combo) {
                CastOptions o = convention_options(static_cast<Convention>((i + combo) % 4), f);
                o.mode = modes[combo % 6];
                o.saturate = (combo / 6) % 2;
                o.flush_input = (combo / 12) % 2;
                o.flush_output = (combo / 24) % 2;
                const std::uint64_t bits =
                    in.from_f32 ? cast_from_f32(static_cast<float>(in.x), f, o) : cast_from_f64(in.x, f, o);
                const OracleResult want = oracle_cast(f, in.x, n, source_min_normal, o);
                ++checked;
                if (!same_result(f, bits, want)) {
                    if (bad++ == 0)
                        first = fmt::format("{} x={:a} ({}) mode={} sat={} daz={} ftz={}: emu 0x{:x} = {} oracle {}{}",
                                            f.name, in.x, in.from_f32 ? "f32" : "f64", rounding_mode_name(o),
                                            o.saturate, o.flush_input, o.flush_output, bits, decode(f, bits),
                                            want.is_nan ? "nan" : "", want.is_nan ? 0.0 : want.value);
                }
            }
        }
        std::lock_guard<std::mutex> lock(mutex);
        result.checked += checked;
        result.mismatches += bad;
        if (bad && result.first_mismatch.empty()) result.first_mismatch = first;
    });
    return result;
}

}  // namespace roundscope::test
