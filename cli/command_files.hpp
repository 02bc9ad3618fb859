#pragma once
// Where a command's tensor files and JSON result go. From the command line: the disk and
// standard output. In a run in process (run_in_process.hpp, what the Python package calls):
// the tensor files the caller holds in memory under names of its choosing, outputs kept in
// memory, and the JSON handed back. Commands read, write and print through these functions
// only, so both ways run the same checks and give the same bits.
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/tensor.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::cli {

/// The file `path`: the caller's in-memory file of that name, else read_tensor_file.
TensorFile read_input(const std::string& path, const ReadOptions& options = {});
/// `FILE` or `FILE:NAME`, as read_tensor_file_selection.
TensorFile read_input_selection(std::string_view argument, const ReadOptions& options = {});

/// Writes `tensors` to `path` (write_tensor_file), or keeps them where `path` is an in-memory output.
void write_output(const std::string& path, std::span<const Tensor> tensors,
                  const std::map<std::string, std::string>& metadata = {});

/// check_output_path, except for an in-memory output (nothing on disk to protect).
void check_output(const std::string& option, const std::string& path, const std::vector<std::string>& inputs);

/// The command's result: one line on standard output, or handed to the run in process.
void print_json(const nlohmann::json& result);

/// The files of one run in process. Installed for the current thread by InProcessFiles::Scope.
struct InProcessFiles {
    std::map<std::string, TensorFile> inputs;   // by the name the command line gives
    std::map<std::string, TensorFile> outputs;  // by name: declared empty, filled by write_output
    std::optional<nlohmann::json> json;         // what print_json received

    /// While alive, this thread's commands read, write and print through `files`.
    class Scope {
    public:
        explicit Scope(InProcessFiles& files);
        ~Scope();
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        InProcessFiles* previous_;
    };
};

}  // namespace roundscope::cli
