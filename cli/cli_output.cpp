#include "cli/cli_output.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <fmt/core.h>

#include "lib/error.hpp"

namespace roundscope::cli {

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

void print_table(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> widths(headers.size());
    for (std::size_t c = 0; c < headers.size(); ++c) widths[c] = headers[c].size();
    for (const auto& row : rows)
        for (std::size_t c = 0; c < row.size() && c < widths.size(); ++c)
            widths[c] = std::max(widths[c], row[c].size());
    auto print_row = [&](const std::vector<std::string>& row) {
        std::string line;
        for (std::size_t c = 0; c < row.size(); ++c) {
            line += fmt::format("{:<{}}", row[c], widths[c]);
            if (c + 1 < row.size()) line += "  ";
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        std::puts(line.c_str());
    };
    print_row(headers);
    for (const auto& row : rows) print_row(row);
}

}  // namespace roundscope::cli
