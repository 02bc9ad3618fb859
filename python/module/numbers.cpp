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

nb::tuple cast(const RawBytes& bytes, const std::string& dtype, const std::vector<std::uint64_t>& shape,
               const std::string& to, const std::string& round, const std::string& convention,
               std::optional<bool> saturate, bool flush_input, bool flush_output, std::uint64_t seed, double scale,
               int threads) {
    cli::CastFlags flags;
    flags.to = to, flags.round = round, flags.convention = convention;
    flags.sat = saturate.value_or(false), flags.nosat = !saturate.value_or(true);
    flags.flush_input = flush_input, flags.flush_output = flush_output, flags.seed = seed;
    const emu::Format& format = cli::require_format(to, "--to");
    const emu::CastOptions options = flags.options(format);
    const Tensor in = tensor_view("x", bytes, dtype, shape, nb::handle());
    Tensor out;
    {
        nb::gil_scoped_release released;
        out = emu::cast_tensor(in, format, options, scale, threads);
    }
    return nb::make_tuple(to_array(std::move(out)), std::string(format.name));
}

nb::object decode(const RawBytes& bytes, const std::string& dtype, const std::vector<std::uint64_t>& shape,
                  bool to_double, int threads) {
    const Tensor in = tensor_view("x", bytes, dtype, shape, nb::handle());
    if (to_double) {
        std::vector<double> x;
        {
            nb::gil_scoped_release released;
            x = emu::decode_tensor<double>(in, threads);
        }
        return to_array(std::move(x), shape);
    }
    std::vector<float> x;
    {
        nb::gil_scoped_release released;
        x = emu::decode_tensor<float>(in, threads);
    }
    return to_array(std::move(x), shape);
}

}  // namespace

void bind_numbers(nb::module_& m) {
    m.def("dtypes", &dtypes, "Every dtype: (name, numpy descr, ml_dtypes name, bytes per element, is floating).");
    m.def("cast", &cast, nb::arg("bytes"), nb::arg("dtype"), nb::arg("shape"), nb::arg("to"), nb::arg("round"),
          nb::arg("convention"), nb::arg("saturate").none(), nb::arg("flush_input"), nb::arg("flush_output"),
          nb::arg("seed"), nb::arg("scale"), nb::arg("threads"),
          "Rounds every element once into `to`: (bit patterns, format name).");
    m.def("decode", &decode, nb::arg("bytes"), nb::arg("dtype"), nb::arg("shape"), nb::arg("to_double"),
          nb::arg("threads"), "The exact values (float64), or float32.");
}

}  // namespace roundscope::python
