#pragma once
// The project's Python scripts beside this folder (cli/*.py: the plots, the report's page and its
// TensorBoard export), run with the project's Python: .venv at the source root, where
// tools/setup.sh installs what they import, else python3.
#include <string>
#include <vector>

namespace roundscope::cli {

/// Before any work: an Error naming `option` where no Python with `module` importable is found.
void check_python_module(const std::string& option, const std::string& module);

/// Runs cli/`script` with `arguments` (its standard input: `input`). Throws an Error, `what`
/// followed by the script's last line of standard error, when it fails.
void run_python_script(const std::string& what, const std::string& script, const std::vector<std::string>& arguments,
                       const std::string& input = "");

}  // namespace roundscope::cli
