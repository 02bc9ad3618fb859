// formats, dtypes, cast and decode: the hot paths, called directly (no command line).
#include <optional>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "emu/batch/tensor_cast.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "lib/dtype.hpp"
#include "lib/error.hpp"
#include "python/module/arrays.hpp"
#include "tools/cli/cast_flags.hpp"

namespace roundscope::python {
namespace {

nb::list dtypes() {
    nb::list out;
    for (const DTypeInfo& d : all_dtypes())
        out.append(nb::make_tuple(std::string(d.name), std::string(d.numpy), std::string(d.ml_dtypes), d.storage_bytes,
                                  d.kind == DTypeKind::floating));
    return out;
}

/// The options `cast` was given, as `roundscope cast`'s flags read them.
struct CastRequest {
    const emu::Format* format;
    emu::CastOptions options;
};

CastRequest cast_request(const std::string& to, const std::string& round, const std::string& convention,
                         std::optional<bool> saturate, bool flush_input, bool flush_output, std::uint64_t seed) {
    cli::CastFlags flags;
    flags.to = to, flags.round = round, flags.convention = convention;
    flags.sat = saturate.value_or(false), flags.nosat = !saturate.value_or(true);
    flags.flush_input = flush_input, flags.flush_output = flush_output, flags.seed = seed;
    const emu::Format& format = cli::require_format(to, "--to");
    return {&format, flags.options(format)};
}

nb::tuple cast_tensor(const Tensor& in, const CastRequest& r, double scale, int threads) {
    Tensor out;
    {
        // Small casts are quicker than releasing and taking back the GIL.
        std::optional<nb::gil_scoped_release> released;
        if (in.size() > 4096) released.emplace();
        out = emu::cast_tensor(in, *r.format, r.options, scale, threads);
    }
    return nb::make_tuple(to_array(std::move(out)), std::string(r.format->name));
}

nb::tuple cast(const RawBytes& bytes, const std::string& dtype, const std::vector<std::uint64_t>& shape,
               const std::string& to, const std::string& round, const std::string& convention,
               std::optional<bool> saturate, bool flush_input, bool flush_output, std::uint64_t seed, double scale,
               int threads) {
    const CastRequest r = cast_request(to, round, convention, saturate, flush_input, flush_output, seed);
    return cast_tensor(tensor_view("x", bytes, dtype, shape, nb::handle()), r, scale, threads);
}

/// The dtype of a numpy array nanobind could import (not the ml_dtypes types), found in lib's
/// dtype table by kind and width; nullopt if none.
std::optional<DType> dtype_of(const nb::dlpack::dtype& t) {
    using Code = nb::dlpack::dtype_code;
    const auto code = static_cast<Code>(t.code);
    if (t.lanes != 1) return std::nullopt;
    if (code == Code::Bfloat) return t.bits == 16 ? std::optional(DType::bf16) : std::nullopt;
    if (code == Code::Bool) return DType::boolean;
    for (const DTypeInfo& d : all_dtypes()) {
        const bool kind = (code == Code::Float && d.kind == DTypeKind::floating && !d.numpy.empty()) ||
                          (code == Code::Int && d.kind == DTypeKind::signed_integer) ||
                          (code == Code::UInt && d.kind == DTypeKind::unsigned_integer);
        if (kind && d.storage_bytes * 8 == t.bits) return d.dtype;
    }
    return std::nullopt;
}

using NativeArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

/// cast for an array of a numpy dtype, taken as it is: the call that costs least.
nb::object cast_array(const NativeArray& x, const std::string& to, const std::string& round,
                      const std::string& convention, std::optional<bool> saturate, bool flush_input,
                      bool flush_output, std::uint64_t seed, double scale, int threads) {
    const std::optional<DType> t = dtype_of(x.dtype());
    if (!t) return nb::none();  // the caller takes the general path
    const CastRequest r = cast_request(to, round, convention, saturate, flush_input, flush_output, seed);
    Shape shape(x.ndim());
    for (std::size_t i = 0; i < x.ndim(); ++i) shape[i] = x.shape(i);
    const auto* data = static_cast<const std::byte*>(x.data());
    const std::size_t bytes = x.size() * static_cast<std::size_t>(info(*t).storage_bytes);
    return cast_tensor(Tensor::view("x", *t, std::move(shape), {data, bytes}, nullptr), r, scale, threads);
}

using OutputBytes = nb::ndarray<std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

/// cast into the caller's array (its bytes, as a flat uint8 view): no allocation per call.
void cast_into(const RawBytes& bytes, const std::string& dtype, const std::vector<std::uint64_t>& shape,
               OutputBytes out, const std::string& to, const std::string& round, const std::string& convention,
               std::optional<bool> saturate, bool flush_input, bool flush_output, std::uint64_t seed, double scale,
               int threads) {
    const CastRequest r = cast_request(to, round, convention, saturate, flush_input, flush_output, seed);
    const Tensor in = tensor_view("x", bytes, dtype, shape, nb::handle());
    const std::span<std::byte> target(reinterpret_cast<std::byte*>(out.data()), out.size());
    std::optional<nb::gil_scoped_release> released;
    if (in.size() > 4096) released.emplace();
    emu::cast_tensor_into(in, *r.format, r.options, target, scale, threads);
}

nb::object decode(const RawBytes& bytes, const std::string& dtype, const std::vector<std::uint64_t>& shape,
                  bool to_double, int threads) {
    const Tensor in = tensor_view("x", bytes, dtype, shape, nb::handle());
    auto values = [&](auto real) {
        std::vector<decltype(real)> x;
        {
            nb::gil_scoped_release released;
            x = emu::decode_tensor<decltype(real)>(in, threads);
        }
        return to_array(std::move(x), shape);
    };
    return to_double ? values(0.0) : values(0.0f);
}

std::string format_name(const std::string& name) { return std::string(cli::require_format(name, "--to").name); }

}  // namespace

void bind_numbers(nb::module_& m) {
    m.def("dtypes", &dtypes, "Every dtype: (name, numpy descr, ml_dtypes name, bytes per element, is floating).");
    m.def("cast", &cast, nb::arg("bytes"), nb::arg("dtype"), nb::arg("shape"), nb::arg("to"), nb::arg("round"),
          nb::arg("convention"), nb::arg("saturate").none(), nb::arg("flush_input"), nb::arg("flush_output"),
          nb::arg("seed"), nb::arg("scale"), nb::arg("threads"),
          "Rounds every element once into `to`: (bit patterns, format name).");
    m.def("cast_array", &cast_array, nb::arg("x").noconvert(), nb::arg("to"), nb::arg("round"), nb::arg("convention"),
          nb::arg("saturate").none(), nb::arg("flush_input"), nb::arg("flush_output"), nb::arg("seed"),
          nb::arg("scale"), nb::arg("threads"),
          "cast for a C-contiguous array of a numpy dtype: (bit patterns, format name), or None for other arrays.");
    m.def("cast_into", &cast_into, nb::arg("bytes"), nb::arg("dtype"), nb::arg("shape"), nb::arg("out"), nb::arg("to"),
          nb::arg("round"), nb::arg("convention"), nb::arg("saturate").none(), nb::arg("flush_input"),
          nb::arg("flush_output"), nb::arg("seed"), nb::arg("scale"), nb::arg("threads"),
          "cast into `out` (the bytes of an array holding x's element count in `to`).");
    m.def("format_name", &format_name, nb::arg("name"),
          "The format's own name for a name or alias; ValueError as `cast --to` gives it otherwise.");
    m.def("decode", &decode, nb::arg("bytes"), nb::arg("dtype"), nb::arg("shape"), nb::arg("to_double"),
          nb::arg("threads"), "The exact values (float64), or float32.");
}

}  // namespace roundscope::python
