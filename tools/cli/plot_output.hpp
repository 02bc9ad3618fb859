#pragma once
// Plots of the analyses: a command's JSON piped to tools/python/roundscope_plot.py (matplotlib,
// installed in .venv by tools/setup.sh), which draws one PNG.
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace roundscope::cli {

/// --plot PNG.
void add_plot_flag(CLI::App* cmd, std::string& png);

/// Draws the plot of `kind` (bias, pcollapse, leak, headroom, attribute) for `report`, which has
/// the shape of that command's --json output, into `png`. Throws Error naming --plot and the
/// file when it cannot (no Python with matplotlib, an unwritable path).
void draw_plot(std::string_view kind, const nlohmann::json& report, const std::string& png);

}  // namespace roundscope::cli
