#include "cli/plot_output.hpp"

#include <fmt/format.h>

#include <vector>

#include "cli/command_files.hpp"
#include "cli/python_script.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"

namespace roundscope::cli {

void add_plot_flag(CLI::App* cmd, std::string& png) {
    cmd->add_option("--plot", png, "Also draw the result into this PNG file (needs matplotlib: tools/setup.sh)");
}

void check_plot(const std::string& png, std::initializer_list<std::string> inputs) {
    if (png.empty()) return;
    std::vector<std::string> files;
    for (const std::string& f : inputs)
        if (!f.empty()) files.push_back(f);
    check_output("--plot", png, files);
    check_python_module("--plot", "matplotlib");
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
    run_python_module(fmt::format("--plot: could not draw '{}'", png), "plot",
                      {std::string(kind), file.temporary_path()}, report.dump());
    file.commit();
}

}  // namespace roundscope::cli
