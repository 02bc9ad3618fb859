#pragma once
// Shell completion scripts for the command line, generated from the registered commands and
// options themselves (so they cannot fall behind them), with the values of the options that name
// a table: recipes, formats, block formats, rounding modes, conventions, architectures.
#include <string>

#include <CLI/CLI.hpp>

namespace roundscope::cli {

/// The bash completion script for `app` (every command registered).
std::string bash_completion(const CLI::App& app);
/// The zsh completion script (#compdef roundscope) for `app`.
std::string zsh_completion(const CLI::App& app);

}  // namespace roundscope::cli
