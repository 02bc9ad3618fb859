#include "cli/plot_output.hpp"

#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <vector>

#include "api/python_script.hpp"
#include "cli/command_files.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"

namespace roundscope::cli {

namespace {

// The drawing's format by the name's extension: png, pdf or svg; empty for another.
std::string plot_format(const std::string& path) {
    std::string ext = std::filesystem::path(path).extension().string();
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const char* f : {".png", ".pdf", ".svg"})
        if (ext == f) return ext.substr(1);
    return {};
}

}  // namespace

void add_plot_flag(CLI::App* cmd, std::string& png) {
    cmd->add_option("--plot", png,
                    "Also draw the result into this file, PNG, PDF or SVG by its extension (needs matplotlib: "
                    "tools/setup.sh)");
}

void check_plot(const std::string& png, std::initializer_list<std::string> inputs) {
    if (png.empty()) return;
    std::vector<std::string> files;
    for (const std::string& f : inputs)
        if (!f.empty()) files.push_back(f);
    check_output("--plot", png, files);
    if (plot_format(png).empty())
        throw Error("--plot: '" + printable(png) + "' names no format drawn here (.png, .pdf or .svg)");
    api::check_python_module("--plot", "matplotlib");
}

void output_analysis(std::string_view kind, const nlohmann::json& result, bool json,
                     const std::function<void()>& print_text, const std::string& png) {
    if (json)
        print_json(result);
    else
        print_text();
    if (!png.empty()) draw_plot(kind, result, png);
}

void draw_plot(std::string_view kind, const nlohmann::json& report, const std::string& png) {
    AtomicFile file(png);
    api::run_python_module(fmt::format("--plot: could not draw '{}'", png), "plot",
                           {std::string(kind), file.temporary_path(), plot_format(png)}, report.dump());
    file.commit();
}

}  // namespace roundscope::cli
