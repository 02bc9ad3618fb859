#pragma once
// Everything that decides how a value is rounded into a format: the mode, what overflow does,
// subnormal flushing, and the special-value conventions on which libraries disagree.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "emu/numbers/format.hpp"

namespace roundscope::emu {

enum class RoundingMode : std::uint8_t {
    nearest_even,      // rne
    nearest_away,      // rna: nearest, ties away from zero
    toward_zero,       // rtz
    toward_positive,   // up
    toward_negative,   // down
    to_odd,            // odd: truncate, then set the last bit if anything was discarded
    stochastic_exact,  // sr: round up with probability exactly (x - down) / (up - down)
    stochastic_bits,   // sr:N: add N random bits to the N leading discarded bits (cvt.rs-like)
};

/// Sign of the NaN produced from a NaN input: positive, the input's, or negative (PyTorch's
/// bfloat16 on the CPU: every NaN is 0xFFFF).
enum class NanSign : std::uint8_t { positive, keep, negative };
/// Fraction of the NaN produced (IEEE-like targets): all ones (NVIDIA), only the quiet bit
/// (ml_dtypes), or the input's payload cut to the target's fraction with the quiet bit set
/// (x86's F16C conversion, which PyTorch's float16 takes on the CPU).
enum class NanPayload : std::uint8_t { all_ones, quiet, truncated };
/// What a NaN input becomes in a format without NaN (FP6, FP4).
enum class NanToFinite : std::uint8_t { max_positive, zero, negated_zero };

struct CastOptions {
    RoundingMode mode = RoundingMode::nearest_even;
    int sr_bits = 0;            // N of stochastic_bits, 1..23
    bool saturate = false;      // overflow and Inf give the max finite value
    bool flush_input = false;   // source subnormals are read as zero (DAZ)
    bool flush_output = false;  // subnormal results become zero (FTZ, tininess after rounding)
    NanSign nan_sign = NanSign::positive;
    NanPayload nan_payload = NanPayload::all_ones;
    NanToFinite nan_to_finite = NanToFinite::max_positive;
    // Into an unsigned format, a negative input counts as its magnitude and a zero as the
    // smallest value (PyTorch's float8_e8m0fnu; otherwise both are NaN).
    bool unsigned_magnitude = false;
    std::uint64_t seed = 0;  // stochastic modes: Philox key
};

/// Named conventions: the choices a library makes together. `cuda` is the default.
enum class Convention : std::uint8_t { cuda, ocp, ml_dtypes, torch };

/// The options of `convention` for casts into `to` (round-to-nearest-even in every case).
CastOptions convention_options(Convention convention, const Format& to);

std::optional<Convention> parse_convention(std::string_view name);
/// The convention called `name`; an Error naming it and the known ones otherwise.
Convention convention_named(std::string_view name);
std::string_view convention_name(Convention c);

/// Parses `rne`, `rna`, `rtz`, `up`, `down`, `odd`, `sr`, `sr:N`; throws Error naming the
/// mode on anything else (N outside 1..23 included).
void parse_rounding_mode(std::string_view text, CastOptions& options);
std::string rounding_mode_name(const CastOptions& options);

/// What a caller asks of a cast: a convention's choices, then each choice given on top of it.
/// The one policy of the command line's cast flags and the Python package's cast arguments.
struct CastPolicy {
    Convention convention = Convention::cuda;
    std::string rounding;                            // parse_rounding_mode's names; empty: nearest even
    std::optional<bool> saturate;                    // empty: the convention's
    bool flush_input = false, flush_output = false;  // added to the convention's
    std::uint64_t seed = 0;
};

/// The options of `policy` for casts into `to`; an Error for an unknown rounding mode.
CastOptions cast_options(const CastPolicy& policy, const Format& to);

/// Is the mode free of random bits?
constexpr bool is_deterministic(RoundingMode m) {
    return m != RoundingMode::stochastic_exact && m != RoundingMode::stochastic_bits;
}

}  // namespace roundscope::emu
