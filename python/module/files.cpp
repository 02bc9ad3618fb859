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

nb::tuple read(const std::string& path, const std::optional<std::string>& dtype, bool map) {
    ReadOptions options;
    options.dtype_option = "dtype";
    options.access = map ? FileAccess::map : FileAccess::copy;
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
    m.def("read", &read, nb::arg("path"), nb::arg("dtype").none(), nb::arg("map") = false,
          "The tensors of a file ({name: (bits, dtype)}) and its metadata, as read-only views of the file in memory "
          "(mapped where map is true).");
    m.def("write", &write, nb::arg("path"), nb::arg("tensors"), nb::arg("metadata"),
          "Writes {name: (bytes, dtype, shape)} atomically (a .npy holds one tensor).");
}

}  // namespace roundscope::python
