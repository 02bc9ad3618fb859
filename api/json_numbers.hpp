#pragma once
// Doubles as JSON values, the one way every result writes them (JSON has no NaN or infinity),
// and as text that reads back as the same double.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace roundscope::api {

/// A double as JSON: a number, or "nan" / "inf" / "-inf" (JSON has no such numbers).
nlohmann::json json_number(double x);

/// json_number's value back: a number, or "nan", "inf", "-inf"; Error naming `what` otherwise.
double json_number_value(const nlohmann::json& j, const std::string& what);

/// json_number of the value, or null when there is none.
nlohmann::json json_number(const std::optional<double>& x);

/// The count, or null when there is none (not measured).
nlohmann::json json_count(const std::optional<std::uint64_t>& x);

/// Each of `xs` as json_number, in an array.
nlohmann::json json_numbers(const std::vector<double>& xs);

/// A double printed so that reading it back gives the same double (shortest round trip).
std::string format_double(double x);

/// `bits` as 0x-prefixed hex with as many digits as a `width`-bit pattern needs.
std::string hex_bits(std::uint64_t bits, int width);

}  // namespace roundscope::api
