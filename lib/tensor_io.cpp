#include "lib/tensor_io.hpp"

#include <cctype>
#include <filesystem>

#include "lib/error.hpp"
#include "lib/npy.hpp"
#include "lib/safetensors.hpp"

namespace roundscope {
namespace {

enum class FileKind { safetensors, npy };

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// By extension, in any letter case (MODEL.SAFETENSORS, x.NPY).
FileKind kind_of(const std::string& path) {
    const std::string p = lower(path);
    if (p.ends_with(".safetensors")) return FileKind::safetensors;
    if (p.ends_with(".npy")) return FileKind::npy;
    throw Error(path + ": unknown tensor file type (expected .safetensors or .npy)");
}

}  // namespace

TensorFile read_tensor_file(const std::string& path, const ReadOptions& options) {
    if (kind_of(path) == FileKind::npy) {
        TensorFile f;
        f.path = path;
        f.tensors.push_back(
            read_npy(path, options.dtype, options.dtype_option, options.access.value_or(default_file_access())));
        return f;
    }
    if (options.dtype)
        throw Error(path + ": " + options.dtype_option + " applies to .npy files; safetensors files name their dtypes");
    return read_safetensors(path, options.access.value_or(default_file_access()));
}

void write_tensor_file(const std::string& path, std::span<const Tensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
    // Before any byte is written: the file would replace a folder's entry by rename, a FIFO or a
    // device silently, or fail only once written.
    std::error_code ec;
    if (const auto st = std::filesystem::symlink_status(path, ec);
        !ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st) && !std::filesystem::is_symlink(st))
        throw Error(path + ": exists and is not a regular file");
    if (kind_of(path) == FileKind::safetensors) return write_safetensors(path, tensors, metadata);
    if (tensors.size() != 1)
        throw Error(path + ": an .npy file holds one tensor, not " + std::to_string(tensors.size()) +
                    " (write a .safetensors file)");
    write_npy(path, tensors[0]);
}

TensorSelection parse_tensor_selection(std::string_view argument) {
    const std::string_view ext = ".safetensors:";
    const std::size_t at = lower(argument).rfind(ext);
    if (at == std::string_view::npos) return {std::string(argument), std::nullopt};
    const std::size_t colon = at + ext.size() - 1;
    std::string name(argument.substr(colon + 1));
    if (name.empty()) throw Error(std::string(argument) + ": empty tensor name after ':'");
    return {std::string(argument.substr(0, colon)), std::move(name)};
}

TensorFile read_tensor_file_selection(std::string_view argument, const ReadOptions& options) {
    const TensorSelection selection = parse_tensor_selection(argument);
    TensorFile file = read_tensor_file(selection.path, options);
    if (selection.name) {
        Tensor t = file.get(*selection.name);
        file.tensors = {std::move(t)};
    }
    return file;
}

}  // namespace roundscope
