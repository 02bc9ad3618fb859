#include "cli/cli_output.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <fmt/core.h>

#include "lib/error.hpp"

namespace roundscope::cli {

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
