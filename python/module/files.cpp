// read and write: tensor files (.safetensors, .npy) through lib/tensor_io, arrays without copies.
#include <optional>

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "lib/dtype.hpp"
#include "lib/tensor_io.hpp"
#include "python/module/arrays.hpp"

namespace roundscope::python {
namespace {

nb::tuple read(const std::string& path, const std::optional<std::string>& dtype) {
    ReadOptions options;
    options.dtype_option = "dtype";
    if (dtype) options.dtype = parse_dtype(*dtype, "dtype");
    TensorFile file;
    {
        nb::gil_scoped_release released;
        file = read_tensor_file(path, options);
    }
    return to_python(std::move(file));
}

void write(const std::string& path, const nb::dict& tensors, const std::map<std::string, std::string>& metadata) {
    const TensorFile file = tensor_file(path, tensors);
    nb::gil_scoped_release released;
    write_tensor_file(path, file.tensors, metadata);
}

}  // namespace

void bind_files(nb::module_& m) {
    m.def(
        "read", &read, nb::arg("path"), nb::arg("dtype").none(),
        "The tensors of a file ({name: (bits, dtype)}) and its metadata; a mapped file's arrays are read-only views.");
    m.def("write", &write, nb::arg("path"), nb::arg("tensors"), nb::arg("metadata"),
          "Writes {name: (bytes, dtype, shape)} atomically (a .npy holds one tensor).");
}

}  // namespace roundscope::python
