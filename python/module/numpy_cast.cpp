// cast for a plain numpy array, through numpy's C API: the path whose per-call cost matters
// (a one-element cast), so it reads the array and makes the result without any intermediate
// object. Anything it does not serve — another array type, a strided or byte-swapped array, an
// argument of an unexpected type — returns None, and the Python side takes the general path,
// which gives the same bits and the errors.
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL roundscope_numpy_api
#include <numpy/arrayobject.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nanobind/nanobind.h>

#include "emu/batch/tensor_cast.hpp"
#include "lib/dtype.hpp"
#include "python/module/cast_request.hpp"

namespace roundscope::python {
namespace nb = nanobind;
namespace {

// The numpy type of every dtype that has one (the package's table, python/roundscope/_arrays.py),
// indexed by DType; references held for the module's life. Empty until registered: then every
// call takes the general path.
std::vector<PyArray_Descr*> numpy_types;

void register_numpy_dtypes(const nb::dict& table) {
    for (PyArray_Descr* d : numpy_types) Py_XDECREF(d);
    numpy_types.assign(all_dtypes().size(), nullptr);
    for (const DTypeInfo& d : all_dtypes()) {
        PyObject* t = PyDict_GetItemString(table.ptr(), std::string(d.name).c_str());
        if (t == nullptr || t == Py_None) continue;
        PyArray_Descr* descr = nullptr;
        if (PyArray_DescrConverter(t, &descr) != NPY_SUCCEED) throw nb::python_error();
        numpy_types[static_cast<std::size_t>(d.dtype)] = descr;  // keeps the new reference
    }
}

std::optional<DType> dtype_of(PyArray_Descr* descr) {
    for (std::size_t i = 0; i < numpy_types.size(); ++i)
        if (numpy_types[i] == descr) return static_cast<DType>(i);
    return std::nullopt;
}

/// The type results of `dtype` come back as: its numpy type, else unsigned bit patterns.
PyArray_Descr* result_type(DType dtype) {
    if (PyArray_Descr* d = numpy_types.at(static_cast<std::size_t>(dtype))) {
        Py_INCREF(d);
        return d;
    }
    switch (info(dtype).storage_bytes) {
        case 1:
            return PyArray_DescrFromType(NPY_UINT8);
        case 2:
            return PyArray_DescrFromType(NPY_UINT16);
        case 4:
            return PyArray_DescrFromType(NPY_UINT32);
        default:
            return PyArray_DescrFromType(NPY_UINT64);
    }
}

// Arguments as the general path would accept them; nullopt sends the call there.
// (The text lives in the str object, which the caller holds for the whole call.)
std::optional<std::string_view> text(nb::handle h) {
    if (!PyUnicode_CheckExact(h.ptr())) return std::nullopt;
    Py_ssize_t size = 0;
    const char* s = PyUnicode_AsUTF8AndSize(h.ptr(), &size);
    if (s == nullptr) {
        PyErr_Clear();
        return std::nullopt;
    }
    return std::string_view(s, static_cast<std::size_t>(size));
}

std::optional<bool> boolean(nb::handle h) {
    if (h.ptr() == Py_True) return true;
    if (h.ptr() == Py_False) return false;
    return std::nullopt;
}

std::optional<std::uint64_t> unsigned_int(nb::handle h, std::uint64_t max) {
    if (!PyLong_CheckExact(h.ptr())) return std::nullopt;
    const unsigned long long v = PyLong_AsUnsignedLongLong(h.ptr());
    if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
        PyErr_Clear();  // negative or too large: the general path says so
        return std::nullopt;
    }
    if (v > max) return std::nullopt;
    return v;
}

std::optional<double> real(nb::handle h) {
    if (PyFloat_CheckExact(h.ptr())) return PyFloat_AS_DOUBLE(h.ptr());
    if (PyLong_CheckExact(h.ptr())) {
        const double v = PyLong_AsDouble(h.ptr());
        if (v == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return std::nullopt;
        }
        return v;
    }
    return std::nullopt;
}

// The last request each thread read, by its arguments: repeated calls skip parsing them.
template <class Text>
struct RequestKey {
    Text to, round, convention;
    std::optional<bool> saturate;
    bool flush_input, flush_output;
    std::uint64_t seed;
};

const CastRequest& cached_request(const RequestKey<std::string_view>& key) {
    struct Last {
        RequestKey<std::string> key;
        CastRequest request;
    };
    thread_local std::optional<Last> last;
    const bool same = last && last->key.to == key.to && last->key.round == key.round &&
                      last->key.convention == key.convention && last->key.saturate == key.saturate &&
                      last->key.flush_input == key.flush_input && last->key.flush_output == key.flush_output &&
                      last->key.seed == key.seed;
    if (!same) {
        RequestKey<std::string> owned{std::string(key.to),
                                      std::string(key.round),
                                      std::string(key.convention),
                                      key.saturate,
                                      key.flush_input,
                                      key.flush_output,
                                      key.seed};
        const CastRequest r = cast_request(owned.to, owned.round, owned.convention, owned.saturate, owned.flush_input,
                                           owned.flush_output, owned.seed);
        last.emplace(Last{std::move(owned), r});
    }
    return last->request;
}

nb::object cast_numpy(nb::handle x, nb::handle to, nb::handle rounding, nb::handle saturate, nb::handle convention,
                      nb::handle flush_input, nb::handle flush_output, nb::handle seed, nb::handle scale,
                      nb::handle threads) {
    if (!PyArray_CheckExact(x.ptr())) return nb::none();
    auto* array = reinterpret_cast<PyArrayObject*>(x.ptr());
    if (!PyArray_IS_C_CONTIGUOUS(array)) return nb::none();
    const std::optional<DType> dtype = dtype_of(PyArray_DESCR(array));
    const std::optional<std::string_view> to_name = text(to), convention_name = text(convention);
    const std::optional<std::string_view> round =
        rounding.is_none() ? std::optional<std::string_view>("") : text(rounding);
    const std::optional<bool> sat = boolean(saturate), flush_in = boolean(flush_input),
                              flush_out = boolean(flush_output);
    const std::optional<std::uint64_t> seed_value = unsigned_int(seed, ~std::uint64_t{0});
    const std::optional<std::uint64_t> thread_count = unsigned_int(threads, 1024);
    const std::optional<double> scale_value = real(scale);
    if (!dtype || !to_name || !convention_name || !round || (!sat && !saturate.is_none()) || !flush_in || !flush_out ||
        !seed_value || !thread_count || !scale_value)
        return nb::none();

    const CastRequest r = cached_request({*to_name, *round, *convention_name, sat, *flush_in, *flush_out, *seed_value});
    const int ndim = PyArray_NDIM(array);
    npy_intp* dims = PyArray_DIMS(array);
    Shape shape(dims, dims + ndim);
    const auto size = static_cast<std::size_t>(PyArray_SIZE(array));
    const auto* data = static_cast<const std::byte*>(PyArray_DATA(array));
    const Tensor in = Tensor::view("x", *dtype, std::move(shape),
                                   {data, size * static_cast<std::size_t>(info(*dtype).storage_bytes)}, nullptr);

    const DType out_dtype = emu::dtype_of(*r.format);
    PyObject* made =
        PyArray_NewFromDescr(&PyArray_Type, result_type(out_dtype), ndim, dims, nullptr, nullptr, 0, nullptr);
    if (made == nullptr) throw nb::python_error();
    nb::object out = nb::steal(made);
    auto* bytes = static_cast<std::byte*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(made)));
    const std::span<std::byte> target(bytes, size * static_cast<std::size_t>(info(out_dtype).storage_bytes));
    {
        // Small casts are quicker than releasing and taking back the GIL.
        std::optional<nb::gil_scoped_release> released;
        if (size > 4096) released.emplace();
        emu::cast_tensor_into(in, *r.format, r.options, target, *scale_value, static_cast<int>(*thread_count));
    }
    return out;
}

}  // namespace

void bind_numpy_cast(nb::module_& m) {
    if (_import_array() < 0) throw nb::python_error();
    m.def("register_numpy_dtypes", &register_numpy_dtypes, nb::arg("table"),
          "Tells the core the numpy type of each dtype name ({name: numpy dtype or None}).");
    // Every argument may be anything, None included: what this path does not serve goes on to
    // the general path, which reports it.
    m.def("cast_numpy", &cast_numpy, nb::arg("x").none(), nb::arg("to").none(), nb::arg("rounding").none(),
          nb::arg("saturate").none(), nb::arg("convention").none(), nb::arg("flush_input").none(),
          nb::arg("flush_output").none(), nb::arg("seed").none(), nb::arg("scale").none(), nb::arg("threads").none(),
          "cast for a C-contiguous numpy array of a registered type with arguments of the plain types: the result, "
          "or None (then the general path runs).");
}

}  // namespace roundscope::python
