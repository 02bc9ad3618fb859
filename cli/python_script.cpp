#include "cli/python_script.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "lib/error.hpp"

namespace roundscope::cli {
namespace {

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

void check_python_module(const std::string& option, const std::string& module) {
    const std::string probe = shell_quoted(python()) + " -c " + shell_quoted("import " + module) + " > /dev/null 2>&1";
    if (std::system(probe.c_str()) != 0)
        throw Error(fmt::format("{}: no Python with {} found (tools/setup.sh installs one in .venv)", option, module));
}

void run_python_script(const std::string& what, const std::string& script, const std::vector<std::string>& arguments,
                       const std::string& input) {
    const std::filesystem::path path = std::filesystem::path(ROUNDSCOPE_SOURCE_DIR) / "cli" / script;
    char log[] = "/tmp/roundscope-python-XXXXXX";
    const int fd = mkstemp(log);
    if (fd < 0) throw Error(what + ": cannot create a temporary file for the script's messages");
    close(fd);
    std::string command = shell_quoted(python()) + " " + shell_quoted(path.string());
    for (const std::string& a : arguments) command += " " + shell_quoted(a);
    command += fmt::format(" > /dev/null 2> {}", log);
    FILE* pipe = popen(command.c_str(), "w");
    int status = -1;
    if (pipe != nullptr) {
        // A script that dies before reading all of stdin must not take us down with SIGPIPE.
        const auto previous = std::signal(SIGPIPE, SIG_IGN);
        std::fwrite(input.data(), 1, input.size(), pipe);
        status = pclose(pipe);
        std::signal(SIGPIPE, previous);
    }
    const std::string why = last_line(log);
    std::remove(log);
    if (status != 0)
        throw Error(
            fmt::format("{}: {}", what, why.empty() ? "no python3 (tools/setup.sh installs one in .venv)" : why));
}

}  // namespace roundscope::cli
