#include "emu/numbers/cast_options.hpp"

#include <charconv>
#include <string>
#include <utility>
#include <vector>

#include "lib/error.hpp"
#include "lib/suggest.hpp"

namespace roundscope::emu {
namespace {

constexpr std::string_view convention_names[] = {"cuda", "ocp", "ml_dtypes", "torch"};

struct ModeName {
    std::string_view name;
    RoundingMode mode;
};
constexpr ModeName mode_names[] = {
    {"rne", RoundingMode::nearest_even},    {"rna", RoundingMode::nearest_away},     {"rtz", RoundingMode::toward_zero},
    {"up", RoundingMode::toward_positive},  {"down", RoundingMode::toward_negative}, {"odd", RoundingMode::to_odd},
    {"sr", RoundingMode::stochastic_exact},
};

// What people call the rounding modes elsewhere (IEEE 754, C's fenv, numpy, PTX), for the
// suggestion after an unknown mode: a hint, never accepted as the mode itself.
constexpr std::pair<std::string_view, std::string_view> mode_spellings[] = {
    {"nearest", "rne"},   {"nearest_even", "rne"}, {"nearest-even", "rne"}, {"round_nearest_even", "rne"},
    {"rn", "rne"},        {"tonearest", "rne"},    {"nearest_away", "rna"}, {"away", "rna"},
    {"truncate", "rtz"},  {"trunc", "rtz"},        {"toward_zero", "rtz"},  {"towardzero", "rtz"},
    {"zero", "rtz"},      {"rz", "rtz"},           {"ceil", "up"},          {"upward", "up"},
    {"ru", "up"},         {"floor", "down"},       {"downward", "down"},    {"rd", "down"},
    {"stochastic", "sr"}, {"round_to_odd", "odd"},
};

std::string mode_suggestion(std::string_view text) {
    std::vector<std::string> names;
    for (const ModeName& m : mode_names) names.emplace_back(m.name);
    for (const auto& [spelling, mode] : mode_spellings) names.emplace_back(spelling);
    const std::string closest = closest_name(text, names);
    for (const auto& [spelling, mode] : mode_spellings)
        if (closest == spelling) return "; did you mean '" + std::string(mode) + "'?";
    return closest.empty() ? std::string() : "; did you mean '" + closest + "'?";
}

bool is_narrow_float(const Format& f) { return f.bits <= 8 && f.encoding != Encoding::int8; }

}  // namespace

CastOptions convention_options(Convention convention, const Format& to) {
    CastOptions o;
    switch (convention) {
        case Convention::cuda:
            // cuda_fp8.hpp / cuda_fp6.hpp / cuda_fp4.hpp and `cvt.rn.satfinite`: narrow formats
            // saturate (Inf included); NaN becomes the positive all-ones NaN, or +max where the
            // format has no NaN (cuda_fp6.hpp: "NaN converts to positive MAXNORM").
            o.saturate = is_narrow_float(to);
            break;
        case Convention::ocp:
            // OCP 8-bit FP v1.0 section 5: non-saturating, NaN keeps its sign. OCP MX v1.0
            // section 6.3: conversions to FP6/FP4 clamp to the max normal.
            o.nan_sign = NanSign::keep;
            break;
        case Convention::ml_dtypes:
            // ml_dtypes 0.6: non-saturating; NaN becomes a quiet NaN with the input's sign; FP6/FP4
            // (no NaN) clamp and map NaN to a zero of the opposite sign. Measured over all float32
            // inputs (tests/peer/test_ml_dtypes_exhaustive.py).
            o.nan_sign = NanSign::keep;
            o.nan_payload = NanPayload::quiet;
            o.nan_to_finite = NanToFinite::negated_zero;
            break;
        case Convention::torch:
            // PyTorch 2.15's Tensor.to on the CPU, measured over all float32 inputs
            // (tests/peer/test_torch_exhaustive.py): bfloat16 makes every NaN 0xFFFF; float16
            // keeps the NaN's sign and the top of its payload, quiet; the float8 types keep the
            // sign with an all-ones fraction; float8_e4m3fn saturates (overflow and Inf give
            // +-448); float8_e8m0fnu takes the magnitude, and zero as 2^-127. The fnuz types
            // have one NaN and neither saturate.
            o.nan_sign = to == bf16 ? NanSign::negative : NanSign::keep;
            o.nan_payload = to == f16 ? NanPayload::truncated : NanPayload::all_ones;
            o.saturate = to == e4m3;
            o.unsigned_magnitude = to == e8m0;
            break;
    }
    return o;
}

std::optional<Convention> parse_convention(std::string_view name) {
    for (std::size_t i = 0; i < std::size(convention_names); ++i)
        if (convention_names[i] == name) return static_cast<Convention>(i);
    return std::nullopt;
}

Convention convention_named(std::string_view name) {
    if (const auto c = parse_convention(name)) return *c;
    const std::vector<std::string> names(std::begin(convention_names), std::end(convention_names));
    throw Error("unknown convention '" + printable(name) + "'" + did_you_mean(name, names) +
                " (expected cuda, ocp, ml_dtypes or torch)");
}

std::string_view convention_name(Convention c) { return convention_names[static_cast<int>(c)]; }

void parse_rounding_mode(std::string_view text, CastOptions& options) {
    for (const ModeName& m : mode_names) {
        if (m.name == text) {
            options.mode = m.mode;
            options.sr_bits = 0;
            return;
        }
    }
    if (text.starts_with("sr:")) {
        const std::string_view digits = text.substr(3);
        int n = 0;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
        if (ec != std::errc{} || end != digits.data() + digits.size() || n < 1 || n > 23)
            throw Error("rounding mode '" + printable(text) + "': N of sr:N must be an integer in 1..23");
        options.mode = RoundingMode::stochastic_bits;
        options.sr_bits = n;
        return;
    }
    throw Error("unknown rounding mode '" + printable(text) + "'" + mode_suggestion(text) +
                " (expected rne, rna, rtz, up, down, odd, sr or sr:N)");
}

CastOptions cast_options(const CastPolicy& policy, const Format& to) {
    CastOptions o = convention_options(policy.convention, to);
    if (!policy.rounding.empty()) parse_rounding_mode(policy.rounding, o);
    if (policy.saturate) o.saturate = *policy.saturate;
    o.flush_input = o.flush_input || policy.flush_input;
    o.flush_output = o.flush_output || policy.flush_output;
    o.seed = policy.seed;
    return o;
}

std::string rounding_mode_name(const CastOptions& options) {
    if (options.mode == RoundingMode::stochastic_bits) return "sr:" + std::to_string(options.sr_bits);
    for (const ModeName& m : mode_names)
        if (m.mode == options.mode) return std::string(m.name);
    return "?";
}

}  // namespace roundscope::emu
