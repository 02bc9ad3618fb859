#pragma once
// Each subcommand registers itself on the CLI11 app; its callback does the work and may throw
// roundscope::Error, which main() turns into `roundscope: error: ...` and exit code 2.
#include <CLI/CLI.hpp>

namespace roundscope::cli {

void add_formats_command(CLI::App& app);
void add_cast_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_mx_command(CLI::App& app);

}  // namespace roundscope::cli
