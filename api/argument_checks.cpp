#include "api/argument_checks.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "api/argument_error.hpp"

namespace roundscope::api {

std::string out_of_range(IntegerRange range, const std::string& shown) {
    return fmt::format("must be an integer from {} to {}, not {}", range.lo, range.hi, shown);
}

std::string out_of_range(FiniteRange range, const std::string& shown) {
    return fmt::format("must be a finite number {} {:g} and at most {:g}, not {}",
                       range.above_lo ? "above" : "of at least", range.lo, range.hi, shown);
}

std::string seed_out_of_range(const std::string& shown) {
    return fmt::format("must be an integer from 0 to {}, not {}", std::numeric_limits<std::uint64_t>::max(), shown);
}

std::string quoted(std::int64_t value) { return fmt::format("'{}'", value); }
std::string quoted(double value) { return fmt::format("'{}'", value); }

void check_in(const char* argument, std::int64_t value, IntegerRange range) {
    if (value < range.lo || value > range.hi) throw ArgumentError(argument, out_of_range(range, quoted(value)));
}

void check_in(const char* argument, double value, FiniteRange range) {
    const bool inside =
        std::isfinite(value) && (range.above_lo ? value > range.lo : value >= range.lo) && value <= range.hi;
    if (!inside) throw ArgumentError(argument, out_of_range(range, quoted(value)));
}

}  // namespace roundscope::api
