#include "python/module/arrays.hpp"

#include <memory>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "lib/dtype.hpp"
#include "lib/error.hpp"

namespace roundscope::python {
namespace {

nb::dlpack::dtype unsigned_of(int bytes) {
    switch (bytes) {
        case 1:
            return nb::dtype<std::uint8_t>();
        case 2:
            return nb::dtype<std::uint16_t>();
        case 4:
            return nb::dtype<std::uint32_t>();
        default:
            return nb::dtype<std::uint64_t>();
    }
}

}  // namespace

Tensor tensor_view(std::string name, const RawBytes& bytes, const std::string& dtype,
                   const std::vector<std::uint64_t>& shape, nb::handle owner) {
    const DType t = parse_dtype(dtype, "tensor '" + name + "'");
    const auto count = element_count(shape);
    const auto unit = static_cast<std::uint64_t>(info(t).storage_bytes);
    if (!count || *count > bytes.size() / unit || *count * unit != bytes.size())
        throw Error("tensor '" + name + "': " + std::to_string(bytes.size()) + " bytes do not hold " +
                    shape_string(shape) + " elements of " + dtype);
    // The array stays alive while any tensor made from it does; its reference is dropped
    // under the GIL, whichever thread releases the last tensor. No owner: the caller keeps it.
    std::shared_ptr<const void> keep;
    if (owner.is_valid())
        keep = std::shared_ptr<const void>(new nb::object(nb::borrow(owner)), [](const void* p) {
            nb::gil_scoped_acquire gil;
            delete static_cast<const nb::object*>(p);
        });
    const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
    return Tensor::view(std::move(name), t, shape, {data, bytes.size()}, std::move(keep));
}

TensorFile tensor_file(const std::string& path, const nb::dict& tensors) {
    TensorFile file;
    file.path = path;
    for (auto [key, value] : tensors) {
        const auto entry = nb::cast<nb::tuple>(value);
        if (entry.size() != 3)
            throw Error("tensor '" + nb::cast<std::string>(key) + "': expected (bytes, dtype, shape)");
        const auto bytes = nb::cast<RawBytes>(entry[0]);
        file.tensors.push_back(tensor_view(nb::cast<std::string>(key), bytes, nb::cast<std::string>(entry[1]),
                                           nb::cast<std::vector<std::uint64_t>>(entry[2]), entry[0]));
    }
    return file;
}

nb::object to_array(Tensor t) {
    auto* held = new Tensor(std::move(t));
    nb::capsule owner(held, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
    std::vector<std::size_t> shape(held->shape().begin(), held->shape().end());
    // An empty tensor may have no storage; numpy still wants an address.
    static const std::uint64_t nothing = 0;
    const std::byte* data = held->size() == 0 ? reinterpret_cast<const std::byte*>(&nothing) : held->bytes().data();
    const nb::dlpack::dtype dtype = unsigned_of(info(held->dtype()).storage_bytes);
    if (held->is_view())  // the bytes of a mapped file or of another array: read-only
        return nb::ndarray<nb::numpy, nb::ro>(data, shape.size(), shape.data(), owner, nullptr, dtype).cast();
    return nb::ndarray<nb::numpy>(const_cast<std::byte*>(data), shape.size(), shape.data(), owner, nullptr, dtype)
        .cast();
}

nb::tuple to_python(TensorFile file) {
    nb::dict tensors;
    for (Tensor& t : file.tensors) {
        const std::string name = t.name();
        const std::string dtype(roundscope::name(t.dtype()));
        tensors[name.c_str()] = nb::make_tuple(to_array(std::move(t)), dtype);
    }
    nb::dict metadata;
    for (const auto& [k, v] : file.metadata) metadata[k.c_str()] = v;
    return nb::make_tuple(tensors, metadata);
}

}  // namespace roundscope::python
