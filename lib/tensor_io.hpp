#pragma once
// Tensor files by extension (.safetensors, .npy) and the `FILE:NAME` selection of
// docs/cli.md.
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "lib/mapped_file.hpp"
#include "lib/tensor.hpp"

namespace roundscope {

struct ReadOptions {
    std::optional<DType> dtype;            // element type of an .npy with an opaque descr (ml_dtypes types)
    std::string dtype_option = "a dtype";  // how the caller gives `dtype`, for messages ("--dtype")
    std::optional<FileAccess> access;      // mapped or copied in (lib/mapped_file.hpp); unset: the default
};

/// A .safetensors file, or an .npy file as a one-tensor file named after its stem (extensions in
/// any letter case).
TensorFile read_tensor_file(const std::string& path, const ReadOptions& options = {});
/// .safetensors: all tensors; .npy: exactly one (the metadata cannot be stored).
void write_tensor_file(const std::string& path, std::span<const Tensor> tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// `FILE` or `FILE:NAME`. The split is at the last ':' that follows a .safetensors extension,
/// so paths with ':' elsewhere still work.
struct TensorSelection {
    std::string path;
    std::optional<std::string> name;
};
TensorSelection parse_tensor_selection(std::string_view argument);

/// `FILE` (every tensor) or `FILE:NAME` (that tensor alone; an Error naming it if missing).
TensorFile read_tensor_file_selection(std::string_view argument, const ReadOptions& options = {});

}  // namespace roundscope
