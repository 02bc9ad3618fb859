#include "api/json_numbers.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "lib/error.hpp"

namespace roundscope::api {

nlohmann::json json_number(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    return x;
}

double json_number_value(const nlohmann::json& j, const std::string& what) {
    if (j.is_number()) return j.get<double>();
    if (j == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (j == "inf") return std::numeric_limits<double>::infinity();
    if (j == "-inf") return -std::numeric_limits<double>::infinity();
    throw Error(what + " holds " + j.dump() + " where a number belongs");
}

nlohmann::json json_number(const std::optional<double>& x) { return x ? json_number(*x) : nlohmann::json(); }

nlohmann::json json_count(const std::optional<std::uint64_t>& x) { return x ? nlohmann::json(*x) : nlohmann::json(); }

nlohmann::json json_numbers(const std::vector<double>& xs) {
    nlohmann::json out = nlohmann::json::array();
    for (const double x : xs) out.push_back(json_number(x));
    return out;
}

std::string format_double(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    return fmt::format("{}", x);
}

std::string hex_bits(std::uint64_t bits, int width) { return fmt::format("0x{:0{}x}", bits, (width + 3) / 4); }

}  // namespace roundscope::api
