#pragma once
// Arrays crossing into and out of the C++ core. The Python side hands over every array as its
// raw bytes (a flat uint8 view: no copy), its roundscope dtype name and its shape; tensors come
// back as numpy arrays of unsigned integers over the tensor's own bytes (no copy either), which
// the Python side views as the matching numpy or ml_dtypes type.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "lib/tensor.hpp"

namespace roundscope::python {

namespace nb = nanobind;

/// The bytes of one array, C order, as Python passes them.
using RawBytes = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

/// A tensor viewing `bytes` (which `owner`, the array, keeps alive as long as the tensor lives;
/// an invalid handle: the caller keeps the array alive for the tensor's whole life).
/// Error naming the tensor when the byte count does not match the dtype and shape.
Tensor tensor_view(std::string name, const RawBytes& bytes, const std::string& dtype,
                   const std::vector<std::uint64_t>& shape, nb::handle owner);

/// A tensor file from {name: (bytes, dtype, shape)}, in the dict's order.
TensorFile tensor_file(const std::string& path, const nb::dict& tensors);

/// The tensor's bytes as a numpy array of uint8/16/32/64 in its shape, owning the tensor.
nb::object to_array(Tensor t);

/// `values` as a numpy array of `shape`, owning them.
template <class T>
nb::object to_array(std::vector<T> values, const std::vector<std::uint64_t>& shape) {
    auto* held = new std::vector<T>(std::move(values));
    nb::capsule owner(held, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    const std::vector<std::size_t> extents(shape.begin(), shape.end());
    static T nothing{};
    T* data = held->empty() ? &nothing : held->data();
    return nb::ndarray<nb::numpy, T>(data, extents.size(), extents.data(), owner).cast();
}

/// {name: (array, dtype name)} and the metadata of a file.
nb::tuple to_python(TensorFile file);

}  // namespace roundscope::python
