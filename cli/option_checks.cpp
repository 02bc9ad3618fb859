#include "cli/option_checks.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "api/argument_checks.hpp"
#include "api/argument_error.hpp"
#include "emu/block/block_format.hpp"
#include "lib/error.hpp"

namespace roundscope::cli {
namespace {

std::string shown(const std::string& s) { return "'" + printable(s, 40) + "'"; }

// The whole of `text` as a T, or nothing.
template <class T>
bool parse_all(const std::string& text, T& value) {
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    return ec == std::errc() && ptr == end;
}

}  // namespace

CLI::Validator integer_in(std::int64_t lo, std::int64_t hi) {
    return CLI::Validator(
        [lo, hi](std::string& text) -> std::string {
            std::int64_t v = 0;
            if (parse_all(text, v) && v >= lo && v <= hi) return {};
            return api::out_of_range(api::IntegerRange{lo, hi}, shown(text));
        },
        fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator seed_value() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            std::uint64_t v = 0;
            if (!text.empty() && text[0] != '-' && text[0] != '+' && parse_all(text, v)) return {};
            return api::seed_out_of_range(shown(text));
        },
        "UINT64");
}

CLI::Validator finite_in(double lo, double hi, bool above_lo) {
    return CLI::Validator(
        [lo, hi, above_lo](std::string& text) -> std::string {
            double v = 0;
            // from_chars reads "nan" and "inf" too; they are refused with everything out of range.
            if (parse_all(text, v) && std::isfinite(v) && (above_lo ? v > lo : v >= lo) && v <= hi) return {};
            return api::out_of_range(api::FiniteRange{lo, hi, above_lo}, shown(text));
        },
        "NUMBER");
}

CLI::Validator integer_in(api::IntegerRange range) { return integer_in(range.lo, range.hi); }

CLI::Validator finite_in(api::FiniteRange range) { return finite_in(range.lo, range.hi, range.above_lo); }

CLI::Validator thread_count() { return integer_in(api::ranges::threads); }

CLI::Validator non_empty() {
    return CLI::Validator([](std::string& text) -> std::string { return text.empty() ? "must not be empty" : ""; },
                          "TEXT");
}

CLI::Validator accepted_by(std::function<void(const std::string&)> accept, std::string description) {
    return CLI::Validator(
        [accept = std::move(accept)](std::string& text) -> std::string {
            try {
                accept(text);
                return {};
            } catch (const api::ArgumentError& e) {  // CLI11 puts the flag in front of what is wrong
                return e.detail();
            } catch (const Error& e) {
                return e.what();
            }
        },
        std::move(description));
}

CLI::Validator block_format_name() {
    return accepted_by([](const std::string& name) { emu::block_format_named(name); }, "BLOCKFMT");
}

}  // namespace roundscope::cli
