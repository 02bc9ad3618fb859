// libFuzzer target over the command line: the input, split at NUL bytes, is roundscope's argv.
// Every command is registered as roundscope registers it; the app stops once parsing is complete
// (before any command runs), so that parsing and every option's check run but no file is read
// or written. Whatever the
// arguments, a run must end with exit 0 and nothing on the error stream (help, version, a line
// that parses) or exit 2 and exactly one line `roundscope: error: ...`. A crash, undefined
// behaviour, an escaping exception, another exit code or a second line is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

namespace {

constexpr std::size_t max_arguments = 48;

bool one_error_line(std::string_view text) {
    constexpr std::string_view prefix = "roundscope: error: ";
    return text.size() > prefix.size() + 1 && text.substr(0, prefix.size()) == prefix && text.back() == '\n' &&
           text.find('\n') == text.size() - 1;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    // Help and version text go to standard output; the fuzzer's log is standard error.
    if (std::freopen("/dev/null", "w", stdout) == nullptr) std::abort();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string> words{"roundscope"};
    std::string word;
    for (std::size_t i = 0; i < size && words.size() < max_arguments; ++i) {
        if (data[i] == 0) {
            words.push_back(word);
            word.clear();
        } else {
            word += static_cast<char>(data[i]);
        }
    }
    if (words.size() < max_arguments && (!word.empty() || size == 0)) words.push_back(word);
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);

    CLI::App app{"roundscope"};
    roundscope::cli::add_all_commands(app);
    // CLI11 runs the top app's parse-complete callback before any command's callback (and the
    // commands' callbacks own their options' storage, so they must not be replaced).
    app.parse_complete_callback([] { throw roundscope::cli::ExitCode{0}; });
    char* buffer = nullptr;
    std::size_t length = 0;
    std::FILE* errors = open_memstream(&buffer, &length);
    if (errors == nullptr) std::abort();
    const int code = roundscope::cli::run_app(app, static_cast<int>(words.size()), argv.data(), errors);
    std::fclose(errors);
    const std::string text(buffer, length);
    std::free(buffer);
    std::clearerr(stdout);

    const bool ok = (code == 0 && text.empty()) || (code == 2 && one_error_line(text));
    if (!ok) {
        std::fprintf(stderr, "exit %d with error output:\n%s\n", code, text.c_str());
        std::abort();
    }
    return 0;
}
