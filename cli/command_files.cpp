#include "cli/command_files.hpp"

#include <fmt/core.h>

#include "lib/error.hpp"
#include "lib/file_write.hpp"

namespace roundscope::cli {

TensorFile read_input(const std::string& path, const ReadOptions& options) { return read_tensor_file(path, options); }

TensorFile read_input_selection(std::string_view argument, const ReadOptions& options) {
    return read_tensor_file_selection(argument, options);
}

void write_output(const std::string& path, std::span<const Tensor> tensors,
                  const std::map<std::string, std::string>& metadata) {
    write_tensor_file(path, tensors, metadata);
}

void check_output(const std::string& option, const std::string& path, const std::vector<std::string>& inputs) {
    check_output_path(option, path, inputs);
}

void print_json(const nlohmann::json& result) { fmt::print("{}\n", result.dump()); }

}  // namespace roundscope::cli
