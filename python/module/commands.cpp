// run: a roundscope command line run in this process (cli/run_in_process.hpp), with the
// caller's arrays as its input files and its output files kept in memory.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "cli/run_in_process.hpp"
#include "python/module/arrays.hpp"

namespace roundscope::python {
namespace {

nb::tuple run(const std::vector<std::string>& args, const nb::dict& inputs, const std::vector<std::string>& outputs) {
    std::map<std::string, TensorFile> files;
    for (auto [name, tensors] : inputs) {
        const std::string path = nb::cast<std::string>(name);
        files.emplace(path, tensor_file(path, nb::cast<nb::dict>(tensors)));
    }
    cli::InProcessResult result;
    {
        nb::gil_scoped_release released;
        result = cli::run_in_process(args, std::move(files), outputs);
    }
    nb::dict written;
    for (auto& [name, file] : result.outputs) written[name.c_str()] = to_python(std::move(file));
    nb::object json = result.json.is_null() ? nb::none() : nb::cast(result.json.dump());
    return nb::make_tuple(result.exit_code, json, written);
}

}  // namespace

void bind_commands(nb::module_& m) {
    m.def("run", &run, nb::arg("args"), nb::arg("inputs"), nb::arg("outputs"),
          "Runs `roundscope ARGS...` in this process: inputs {file name: {tensor: (bytes, dtype, shape)}} are read "
          "from memory, outputs named in `outputs` are kept: (exit code, JSON text or None, {name: (tensors, "
          "metadata)}).");
}

}  // namespace roundscope::python
