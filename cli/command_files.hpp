#pragma once
// Where a command's tensor files and JSON result go: the disk and standard output. Commands
// read, write and print through these functions only.
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/tensor.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::cli {

/// The file `path` (read_tensor_file).
TensorFile read_input(const std::string& path, const ReadOptions& options = {});
/// `FILE` or `FILE:NAME`, as read_tensor_file_selection.
TensorFile read_input_selection(std::string_view argument, const ReadOptions& options = {});

/// Writes `tensors` to `path` (write_tensor_file).
void write_output(const std::string& path, std::span<const Tensor> tensors,
                  const std::map<std::string, std::string>& metadata = {});

/// check_output_path: before any work, an output that would destroy an input or cannot be written.
void check_output(const std::string& option, const std::string& path, const std::vector<std::string>& inputs);

/// The command's result: one line on standard output.
void print_json(const nlohmann::json& result);

}  // namespace roundscope::cli
