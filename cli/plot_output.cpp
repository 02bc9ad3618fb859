#include "cli/plot_output.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "cli/command_files.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"

namespace roundscope::cli {
namespace {

// The project's Python (.venv at the source root, where setup.sh puts matplotlib), else python3.
std::string python() {
    const std::filesystem::path venv = std::filesystem::path(ROUNDSCOPE_SOURCE_DIR) / ".venv" / "bin" / "python";
    return std::filesystem::exists(venv) ? venv.string() : "python3";
}

// Single quotes for the shell, with any single quote in `s` closed, escaped and reopened.
std::string shell_quoted(const std::string& s) {
    std::string out = "'";
    for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string last_line(const std::string& path) {
    std::ifstream in(path);
    std::string line, last;
    while (std::getline(in, line))
        if (!line.empty()) last = line;
    return last;
}

}  // namespace

void add_plot_flag(CLI::App* cmd, std::string& png) {
    cmd->add_option("--plot", png, "Also draw the result into this PNG file (needs matplotlib: tools/setup.sh)");
}

void check_plot(const std::string& png, std::initializer_list<std::string> inputs) {
    if (png.empty()) return;
    std::vector<std::string> files;
    for (const std::string& f : inputs)
        if (!f.empty()) files.push_back(f);
    check_output("--plot", png, files);
    const std::string probe = shell_quoted(python()) + " -c 'import matplotlib' > /dev/null 2>&1";
    if (std::system(probe.c_str()) != 0)
        throw Error("--plot: no Python with matplotlib found (tools/setup.sh installs one in .venv)");
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
    const std::filesystem::path script = std::filesystem::path(ROUNDSCOPE_SOURCE_DIR) / "cli" / "roundscope_plot.py";
    char log[] = "/tmp/roundscope-plot-XXXXXX";
    const int fd = mkstemp(log);
    if (fd < 0) throw Error("--plot: cannot create a temporary file for the plot's messages");
    close(fd);
    AtomicFile file(png);
    const std::string command =
        fmt::format("{} {} {} {} > /dev/null 2> {}", shell_quoted(python()), shell_quoted(script.string()),
                    std::string(kind), shell_quoted(file.temporary_path()), log);
    FILE* pipe = popen(command.c_str(), "w");
    int status = -1;
    if (pipe != nullptr) {
        // A script that dies before reading all of stdin must not take us down with SIGPIPE.
        const auto previous = std::signal(SIGPIPE, SIG_IGN);
        const std::string text = report.dump();
        std::fwrite(text.data(), 1, text.size(), pipe);
        status = pclose(pipe);
        std::signal(SIGPIPE, previous);
    }
    const std::string why = last_line(log);
    std::remove(log);
    if (status != 0)
        throw Error(fmt::format("--plot: could not draw '{}': {}", png,
                                why.empty() ? "no python3 (tools/setup.sh installs one with matplotlib)" : why));
    file.commit();
}

}  // namespace roundscope::cli
