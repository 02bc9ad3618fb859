// run: a roundscope command line run in this process (cli/run_in_process.hpp), with the
// caller's arrays as its input files and its output files kept in memory.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "cli/commands.hpp"
#include "cli/run_in_process.hpp"
#include "lib/mapped_file.hpp"
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

// The executable's main on `args` (argv[1:]), printing to this process's standard output and
// error: `python -m roundscope` and the `roundscope` console script. Files are mapped as the
// executable maps them (the process is the command; a page lost to a truncation ends it with
// the executable's one-line message).
int main_of_cli(const std::vector<std::string>& args) {
    std::vector<std::string> owned{"roundscope"};
    owned.insert(owned.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : owned) argv.push_back(a.data());
    argv.push_back(nullptr);
    const FileAccess before = default_file_access();
    set_default_file_access(FileAccess::map);
    int code = 0;
    {
        nb::gil_scoped_release released;
        code = cli::run_cli(static_cast<int>(owned.size()), argv.data());
    }
    set_default_file_access(before);
    return code;
}

}  // namespace

void bind_commands(nb::module_& m) {
    m.def("run", &run, nb::arg("args"), nb::arg("inputs"), nb::arg("outputs"),
          "Runs `roundscope ARGS...` in this process: inputs {file name: {tensor: (bytes, dtype, shape)}} are read "
          "from memory, outputs named in `outputs` are kept: (exit code, JSON text or None, {name: (tensors, "
          "metadata)}).");
    m.def("main", &main_of_cli, nb::arg("args"),
          "Runs `roundscope ARGS...` as the executable does (its output on standard output and error) and returns "
          "its exit code.");
}

}  // namespace roundscope::python
