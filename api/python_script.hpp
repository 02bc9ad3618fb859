#pragma once
// The Python package's modules that draw (roundscope.plot, the report's page and its TensorBoard
// export), run as `python -m roundscope.MODULE` by a Python found from where roundscope runs
// (python_script.cpp says which), so that they work wherever the build was made or moved.
#include <string>
#include <vector>

namespace roundscope::api {

/// The interpreter the code runs in, where that is Python (the package: its sys.executable),
/// whose environment has the package: the scripts run with it.
void use_python(const std::string& interpreter);

/// Before any work: an Error naming `option` where no Python with the roundscope package and
/// `module` importable is found.
void check_python_module(const std::string& option, const std::string& module);

/// Runs roundscope.`module` with `arguments` (its standard input: `input`). Throws an Error,
/// `what` followed by the module's last line of standard error, when it fails.
void run_python_module(const std::string& what, const std::string& module, const std::vector<std::string>& arguments,
                       const std::string& input = "");

}  // namespace roundscope::api
