#pragma once
// What every subcommand prints with: JSON values for doubles (api/json_numbers.hpp), hex bit
// strings, aligned tables.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/json_numbers.hpp"

namespace roundscope::cli {

using api::format_double;
using api::hex_bits;
using api::json_count;
using api::json_number;
using api::json_number_value;
using api::json_numbers;

/// Prints rows under headers with columns padded to their widest cell.
void print_table(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows);

}  // namespace roundscope::cli
