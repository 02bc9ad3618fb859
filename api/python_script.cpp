#include "api/python_script.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "lib/error.hpp"
#include "lib/file_write.hpp"

namespace roundscope::api {
namespace {

std::string& host_python() {
    static std::string interpreter;
    return interpreter;
}

std::filesystem::path this_executable() {
    std::error_code ec;
    return std::filesystem::read_symlink("/proc/self/exe", ec);
}

bool is_file(const std::filesystem::path& p) {
    std::error_code ec;
    return !p.empty() && std::filesystem::is_regular_file(p, ec);
}

// The Python that runs the package's scripts, found from where roundscope runs, not from where
// it was built: $ROUNDSCOPE_PYTHON; the Python this code runs in (use_python: the package's own
// commands);
// the active virtual environment; a .venv beside the executable's folder (build/roundscope in a
// checkout that tools/setup.sh set up); python3 on the PATH.
std::string python() {
    if (const char* chosen = std::getenv("ROUNDSCOPE_PYTHON"); chosen && *chosen) return chosen;
    if (!host_python().empty()) return host_python();
    const std::filesystem::path self = this_executable();
    if (const char* venv = std::getenv("VIRTUAL_ENV");
        venv && *venv && is_file(std::filesystem::path(venv) / "bin/python"))
        return (std::filesystem::path(venv) / "bin/python").string();
    for (const char* up : {"..", "."})
        if (const auto p = self.parent_path() / up / ".venv/bin/python"; is_file(p))
            return p.lexically_normal().string();
    return "python3";
}

// The package beside the executable (a build folder's python/, built with it) goes first on
// the script's PYTHONPATH; elsewhere the installed package is imported.
std::string python_path() {
    const std::filesystem::path package = this_executable().parent_path() / "python";
    std::string path = is_file(package / "roundscope" / "__init__.py") ? package.string() : std::string();
    if (const char* old = std::getenv("PYTHONPATH"); old && *old) {
        if (!path.empty()) path += ':';
        path += old;
    }
    return path;
}

// The last non-empty line of what was written to `fd` (rewound first).
std::string last_line(int fd) {
    std::string text;
    char buffer[4096];
    ::lseek(fd, 0, SEEK_SET);
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        text.append(buffer, static_cast<std::size_t>(n));
    }
    std::string last;
    for (std::size_t begin = 0; begin < text.size();) {
        const std::size_t end = std::min(text.find('\n', begin), text.size());
        if (end > begin) last = text.substr(begin, end - begin);
        begin = end + 1;
    }
    return last;
}

// Runs the project's Python with `arguments` (its standard input: `input`) and waits for it;
// true if it exited 0. `why`: the last line it wrote to standard error.
bool run_python(const std::vector<std::string>& arguments, const std::string& input, std::string& why) {
    // The script's standard error goes to a file that has no name once made (nothing to leave
    // behind), held open to read its last line.
    char log[] = "/tmp/roundscope-python-XXXXXX";
    int log_fd = -1;
    {
        const CleanupSignalsHeld held;
        log_fd = ::mkstemp(log);
        if (log_fd >= 0) ::unlink(log);
    }
    int in[2] = {-1, -1};
    if (log_fd < 0 || ::pipe(in) != 0) {
        if (log_fd >= 0) ::close(log_fd);
        why = "cannot start Python (no temporary file or pipe)";
        return false;
    }
    std::vector<std::string> words{python()};
    const std::string search_path = python_path();
    words.insert(words.end(), arguments.begin(), arguments.end());
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    // The script is this process's child, ended and waited for by the cleanup on a signal before
    // it removes the temporary files (the script may be writing one); the signals are blocked
    // until it is registered, and it dies with this process however that ends.
    sigset_t cleanup, previous;
    cleanup_signals(cleanup);
    ::pthread_sigmask(SIG_BLOCK, &cleanup, &previous);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(in[0], 0), ::dup2(null, 1), ::dup2(log_fd, 2);
        ::close(in[0]), ::close(in[1]), ::close(null), ::close(log_fd);
        if (!search_path.empty()) ::setenv("PYTHONPATH", search_path.c_str(), 1);
        ::execvp(argv[0], argv.data());
        ::_exit(127);
    }
    int status = -1;
    {
        std::optional<ChildProcessGuard> guard;
        if (pid > 0) guard.emplace(pid);
        ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
        ::close(in[0]);
        if (pid > 0) {
            // A script that dies before reading all of stdin must not take us down with SIGPIPE.
            const auto old = std::signal(SIGPIPE, SIG_IGN);
            for (std::size_t done = 0; done < input.size();) {
                const ssize_t n = ::write(in[1], input.data() + done, input.size() - done);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) break;
                done += static_cast<std::size_t>(n);
            }
            std::signal(SIGPIPE, old);
        }
        ::close(in[1]);
        while (pid > 0 && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    why = log_fd >= 0 ? last_line(log_fd) : std::string();
    if (log_fd >= 0) ::close(log_fd);
    return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

void use_python(const std::string& interpreter) { host_python() = interpreter; }

void check_python_module(const std::string& option, const std::string& module) {
    std::string why;
    if (!run_python({"-c", "import roundscope, " + module}, "", why))
        throw Error(
            fmt::format("{}: no Python with the roundscope package and {} found (set ROUNDSCOPE_PYTHON; "
                        "tools/setup.sh installs one in .venv)",
                        option, module));
}

void run_python_module(const std::string& what, const std::string& module, const std::vector<std::string>& arguments,
                       const std::string& input) {
    std::vector<std::string> words{"-m", "roundscope." + module};
    words.insert(words.end(), arguments.begin(), arguments.end());
    std::string why;
    if (!run_python(words, input, why))
        throw Error(
            fmt::format("{}: {}", what, why.empty() ? "no python3 (tools/setup.sh installs one in .venv)" : why));
}

}  // namespace roundscope::api
