#pragma once
// The ranges the library's numeric arguments take, declared once: the library checks a request
// against them before any work, and the command line checks its flags against the same ranges
// while it parses (cli/option_checks.hpp). Each refusal says what the argument takes, in the
// words both front ends print: "must be an integer from 1 to 1048576, not '0'".
#include <cstdint>
#include <limits>
#include <string>

namespace roundscope::api {

struct IntegerRange {
    std::int64_t lo = 0, hi = 0;
};

/// A finite number in [lo, hi] (lo excluded when `above_lo`).
struct FiniteRange {
    double lo = 0, hi = 0;
    bool above_lo = false;
};

namespace ranges {
inline constexpr IntegerRange tokens{1, std::int64_t{1} << 31};  // what cannot fit is refused by its memory
inline constexpr IntegerRange head_dim{2, 1024};
inline constexpr IntegerRange heads{1, 4096};
inline constexpr IntegerRange launch_heads{1, std::int64_t{1} << 31};  // B x H of a kernel launch
inline constexpr IntegerRange threads{0, 1024};                        // 0: all cores
inline constexpr IntegerRange k_sink{1, 1 << 20};
inline constexpr IntegerRange tied_keys{1, 1 << 20};
inline constexpr IntegerRange d_model{0, 1 << 16};  // 0: no layer input
inline constexpr IntegerRange steps{1, 100000};
inline constexpr IntegerRange block{1, 1024};
inline constexpr IntegerRange max_tokens{1, 1 << 16};
inline constexpr IntegerRange window{-1, std::int64_t{1} << 40};  // -1: unbounded
inline constexpr IntegerRange truth_bits{16, 1 << 14};
inline constexpr IntegerRange fit_rows{1, std::numeric_limits<std::int64_t>::max()};
inline constexpr IntegerRange beam{1, 64};
inline constexpr IntegerRange max_evaluations{1, 100000000};
inline constexpr IntegerRange top{1, 1000};
inline constexpr IntegerRange explain_rows{0, 100000};
inline constexpr FiniteRange max_seconds{0, 1e9};
inline constexpr IntegerRange mx_block{1, 1 << 20};
inline constexpr IntegerRange axis{-64, 63};
inline constexpr IntegerRange mx_offset{0, 1 << 20};
inline constexpr IntegerRange max_ulp{0, std::numeric_limits<std::int64_t>::max()};
inline constexpr IntegerRange leak_tokens{1, 1 << 20};
inline constexpr IntegerRange report_rows{32, std::int64_t{1} << 40};  // a sample's error needs 32 rows
inline constexpr FiniteRange headroom_within{0, 1e6};
inline constexpr FiniteRange softmax_scale{0, 1e6, true};
inline constexpr FiniteRange softcap{0, 1e6, false};  // 0: none
inline constexpr FiniteRange sink_strength{-100, 100};
inline constexpr FiniteRange tie_gap{0, 100};
inline constexpr FiniteRange p_scale{0, 3.0e38, true};
inline constexpr FiniteRange tolerance{0, std::numeric_limits<double>::max()};
}  // namespace ranges

/// What an argument of `range` takes, and the value given as `shown` ("'0'").
std::string out_of_range(IntegerRange range, const std::string& shown);
std::string out_of_range(FiniteRange range, const std::string& shown);
std::string seed_out_of_range(const std::string& shown);

/// A value as the refusals quote it: '0', '1.5', 'nan'.
std::string quoted(std::int64_t value);
std::string quoted(double value);

/// ArgumentError naming `argument` where `value` is outside `range`.
void check_in(const char* argument, std::int64_t value, IntegerRange range);
void check_in(const char* argument, double value, FiniteRange range);

}  // namespace roundscope::api
