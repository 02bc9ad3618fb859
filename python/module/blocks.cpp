// mx_dequantize: block-scaled elements and scales back to float32 (emu/block). Quantizing runs
// `roundscope mx` in process; the command line has no dequantize-only form, so this one is direct.
#include <optional>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "api/argument_error.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/block/block_quantize.hpp"
#include "lib/error.hpp"
#include "python/module/arrays.hpp"

namespace roundscope::python {
namespace {

void check_dtype(const Tensor& t, const emu::Format& f, const std::string& format) {
    if (t.dtype() != emu::dtype_of(f))
        throw Error("tensor '" + t.name() + "': " + format + " needs " + std::string(f.name) + " values, not " +
                    std::string(name(t.dtype())));
}

nb::object mx_dequantize(const RawBytes& elements, const std::string& elements_dtype,
                         const std::vector<std::uint64_t>& elements_shape, const RawBytes& scales,
                         const std::string& scales_dtype, const std::vector<std::uint64_t>& scales_shape,
                         std::optional<float> per_tensor_scale, const std::string& format, int block, int axis,
                         int offset, int threads) {
    emu::BlockSpec spec;
    spec.format =
        &api::for_argument("format", [&]() -> const emu::BlockFormat& { return emu::block_format_named(format); });
    spec.block = block, spec.axis = axis, spec.offset = offset, spec.threads = threads;
    emu::BlockQuantized q{tensor_view("elements", elements, elements_dtype, elements_shape, nb::handle()),
                          tensor_view("scales", scales, scales_dtype, scales_shape, nb::handle()), per_tensor_scale};
    check_dtype(q.elements, *spec.format->element, format);
    check_dtype(q.scales, *spec.format->scale, format);
    if (!spec.format->nvfp4 && per_tensor_scale) throw Error("per_tensor_scale: applies to nvfp4, not to " + format);
    Tensor out;
    {
        nb::gil_scoped_release released;
        out = emu::block_dequantize(q, spec);
    }
    return to_array(std::move(out));
}

}  // namespace

void bind_blocks(nb::module_& m) {
    m.def("mx_dequantize", &mx_dequantize, nb::arg("elements"), nb::arg("elements_dtype"), nb::arg("elements_shape"),
          nb::arg("scales"), nb::arg("scales_dtype"), nb::arg("scales_shape"), nb::arg("per_tensor_scale").none(),
          nb::arg("format"), nb::arg("block"), nb::arg("axis"), nb::arg("offset"), nb::arg("threads"),
          "Block-scaled elements and their scales as float32 bit patterns.");
}

}  // namespace roundscope::python
