#include "cli/python_script.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "lib/error.hpp"
#include "lib/file_write.hpp"

namespace roundscope::cli {
namespace {

std::string python() {
    const std::filesystem::path venv = std::filesystem::path(ROUNDSCOPE_SOURCE_DIR) / ".venv" / "bin" / "python";
    return std::filesystem::exists(venv) ? venv.string() : "python3";
}

std::string last_line(const std::string& path) {
    std::ifstream in(path);
    std::string line, last;
    while (std::getline(in, line))
        if (!line.empty()) last = line;
    return last;
}

// Runs the project's Python with `arguments` (its standard input: `input`) and waits for it;
// true if it exited 0. `why`: the last line it wrote to standard error.
bool run_python(const std::vector<std::string>& arguments, const std::string& input, std::string& why) {
    char log[] = "/tmp/roundscope-python-XXXXXX";
    const int log_fd = mkstemp(log);
    int in[2] = {-1, -1};
    if (log_fd < 0 || ::pipe(in) != 0) {
        if (log_fd >= 0) ::close(log_fd), std::remove(log);
        why = "cannot start Python (no temporary file or pipe)";
        return false;
    }
    std::vector<std::string> words{python()};
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
    ::close(log_fd);
    why = last_line(log);
    std::remove(log);
    return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

void check_python_module(const std::string& option, const std::string& module) {
    std::string why;
    if (!run_python({"-c", "import " + module}, "", why))
        throw Error(fmt::format("{}: no Python with {} found (tools/setup.sh installs one in .venv)", option, module));
}

void run_python_script(const std::string& what, const std::string& script, const std::vector<std::string>& arguments,
                       const std::string& input) {
    std::vector<std::string> words{(std::filesystem::path(ROUNDSCOPE_SOURCE_DIR) / "cli" / script).string()};
    words.insert(words.end(), arguments.begin(), arguments.end());
    std::string why;
    if (!run_python(words, input, why))
        throw Error(
            fmt::format("{}: {}", what, why.empty() ? "no python3 (tools/setup.sh installs one in .venv)" : why));
}

}  // namespace roundscope::cli
