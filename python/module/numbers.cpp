// formats, dtypes, cast and decode: the hot paths, called directly (no command line).
#include <optional>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "api/argument_error.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "lib/dtype.hpp"
#include "lib/error.hpp"
#include "python/module/arrays.hpp"
#include "python/module/cast_request.hpp"

namespace roundscope::python {

CastRequest cast_request(const std::string& to, const std::string& round, const std::string& convention,
                         std::optional<bool> saturate, bool flush_input, bool flush_output, std::uint64_t seed) {
    const emu::Format& format = api::for_argument("to", [&]() -> const emu::Format& { return emu::format_named(to); });
    emu::CastPolicy policy;
    policy.convention = api::for_argument("convention", [&] { return emu::convention_named(convention); });
    policy.rounding = round;
    policy.saturate = saturate;
    policy.flush_input = flush_input, policy.flush_output = flush_output, policy.seed = seed;
    return {&format, api::for_argument("rounding", [&] { return emu::cast_options(policy, format); })};
}

namespace {

nb::list dtypes() {
    nb::list out;
    for (const DTypeInfo& d : all_dtypes())
        out.append(nb::make_tuple(std::string(d.name), std::string(d.numpy), std::string(d.ml_dtypes), d.storage_bytes,
                                  d.kind == DTypeKind::floating, std::string(d.torch)));
    return out;
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

std::string format_name(const std::string& name) {
    return std::string(api::for_argument("to", [&]() -> const emu::Format& { return emu::format_named(name); }).name);
}

std::optional<std::string> find_format(const std::string& name) {
    const emu::Format* f = emu::find_format(name);
    return f != nullptr ? std::optional<std::string>(f->name) : std::nullopt;
}

std::vector<std::string> format_names() {
    std::vector<std::string> names;
    for (const emu::Format& f : emu::all_formats) names.emplace_back(f.name);
    return names;
}

}  // namespace

void bind_numbers(nb::module_& m) {
    m.def("dtypes", &dtypes, "Every dtype: (name, numpy descr, ml_dtypes name, bytes per element, is floating).");
    m.def("cast", &cast, nb::arg("bytes"), nb::arg("dtype"), nb::arg("shape"), nb::arg("to"), nb::arg("round"),
          nb::arg("convention"), nb::arg("saturate").none(), nb::arg("flush_input"), nb::arg("flush_output"),
          nb::arg("seed"), nb::arg("scale"), nb::arg("threads"),
          "Rounds every element once into `to`: (bit patterns, format name).");
    m.def("cast_into", &cast_into, nb::arg("bytes"), nb::arg("dtype"), nb::arg("shape"), nb::arg("out"), nb::arg("to"),
          nb::arg("round"), nb::arg("convention"), nb::arg("saturate").none(), nb::arg("flush_input"),
          nb::arg("flush_output"), nb::arg("seed"), nb::arg("scale"), nb::arg("threads"),
          "cast into `out` (the bytes of an array holding x's element count in `to`).");
    m.def("format_name", &format_name, nb::arg("name"),
          "The format's own name for a name or alias; ValueError as `cast --to` gives it otherwise.");
    m.def("find_format", &find_format, nb::arg("name"), "The format's own name for a name or alias, or None.");
    m.def("format_names", &format_names, "Every format's own name.");
    m.def("decode", &decode, nb::arg("bytes"), nb::arg("dtype"), nb::arg("shape"), nb::arg("to_double"),
          nb::arg("threads"), "The exact values (float64), or float32.");
}

}  // namespace roundscope::python
