// main: the roundscope command line run in this process, as the executable runs it (`python -m
// roundscope` and the `roundscope` console script). The package's functions call the library
// (api/) directly, not this.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "cli/commands.hpp"
#include "lib/mapped_file.hpp"
#include "python/module/arrays.hpp"

namespace roundscope::python {
namespace {

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
    m.def("main", &main_of_cli, nb::arg("args"),
          "Runs `roundscope ARGS...` as the executable does (its output on standard output and error) and returns "
          "its exit code.");
}

}  // namespace roundscope::python
