#include "cli/command_files.hpp"

#include <fmt/core.h>

#include "lib/error.hpp"
#include "lib/file_write.hpp"

namespace roundscope::cli {
namespace {

thread_local InProcessFiles* current = nullptr;

const TensorFile* in_memory_input(const std::string& path) {
    if (current == nullptr) return nullptr;
    const auto it = current->inputs.find(path);
    return it == current->inputs.end() ? nullptr : &it->second;
}

bool is_in_memory_output(const std::string& path) { return current != nullptr && current->outputs.contains(path); }

}  // namespace

InProcessFiles::Scope::Scope(InProcessFiles& files) : previous_(current) { current = &files; }
InProcessFiles::Scope::~Scope() { current = previous_; }

TensorFile read_input(const std::string& path, const ReadOptions& options) {
    if (const TensorFile* f = in_memory_input(path)) return *f;
    return read_tensor_file(path, options);
}

TensorFile read_input_selection(std::string_view argument, const ReadOptions& options) {
    const TensorSelection selection = parse_tensor_selection(argument);
    const TensorFile* f = in_memory_input(selection.path);
    if (f == nullptr) return read_tensor_file_selection(argument, options);
    if (!selection.name) return *f;
    TensorFile one{f->path, f->metadata, {f->get(*selection.name)}};
    return one;
}

void write_output(const std::string& path, std::span<const Tensor> tensors,
                  const std::map<std::string, std::string>& metadata) {
    if (!is_in_memory_output(path)) return write_tensor_file(path, tensors, metadata);
    current->outputs[path] = TensorFile{path, metadata, {tensors.begin(), tensors.end()}};
}

void check_output(const std::string& option, const std::string& path, const std::vector<std::string>& inputs) {
    if (!is_in_memory_output(path)) check_output_path(option, path, inputs);
}

void print_json(const nlohmann::json& result) {
    if (current != nullptr) {
        current->json = result;
        return;
    }
    fmt::print("{}\n", result.dump());
}

}  // namespace roundscope::cli
