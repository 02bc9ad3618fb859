#pragma once
// Plots of the analyses: a command's JSON piped to `python -m roundscope.plot` (matplotlib,
// installed in .venv by tools/setup.sh), which draws one PNG; and an analysis's output as a
// whole (JSON or text, then the plot).
#include <CLI/CLI.hpp>

#include <functional>

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace roundscope::cli {

/// --plot PNG.
void add_plot_flag(CLI::App* cmd, std::string& png);

/// Before any work: Error naming --plot when `png` (if given) cannot be written (see
/// check_output_path: not an input, not a device, its folder writable) or no Python with
/// matplotlib is found.
void check_plot(const std::string& png, std::initializer_list<std::string> inputs);

/// Draws the plot of `kind` (bias, pcollapse, leak, headroom, attribute) for `report`, which has
/// the shape of that command's --json output, into `png`, atomically (AtomicFile: an old `png`
/// stays whole until the new one is complete). Throws Error naming --plot and the file when it
/// cannot.
void draw_plot(std::string_view kind, const nlohmann::json& report, const std::string& png);

/// An analysis's result out, the same way in every analysis command: `result` on standard output
/// with --json, else the text `print_text` prints; then, with --plot PNG, the plot of `kind`.
void output_analysis(std::string_view kind, const nlohmann::json& result, bool json,
                     const std::function<void()>& print_text, const std::string& png);

}  // namespace roundscope::cli
