// The app: every command registered, the command line parsed, and every way out of a run
// turned into the exit codes of docs/cli.md: 0, 1 (a check found a mismatch), 2 (one line
// `roundscope: error: ...`), 3 (no GPU).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>
#include <string>
#include <string_view>
#include <system_error>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "api/argument_error.hpp"
#include "cli/commands.hpp"
#include "lib/error.hpp"

namespace roundscope::cli {
namespace {

// A VALUE such as -inf or -1.5 reads as an option unless it follows `--`.
bool looks_negative_number(const char* arg) {
    if (arg[0] != '-' || arg[1] == '-' || arg[1] == '\0') return false;
    char* end = nullptr;
    std::strtod(arg, &end);
    return end != arg && *end == '\0';
}

// An argument with a newline or a terminal escape in it stays inside the one line.
int error(std::FILE* errors, const std::string& message) {
    std::string line;
    for (const char c : message) {
        const auto byte = static_cast<unsigned char>(c);
        line += byte < 0x20 || byte == 0x7f ? fmt::format("\\x{:02x}", byte) : std::string(1, c);
    }
    std::fprintf(errors, "roundscope: error: %s\n", line.c_str());
    return 2;
}

// The first argument must name a command; CLI11 alone would call it a stray positional.
std::string command_name_error(CLI::App& app, int argc, char** argv) {
    if (argc < 2 || argv[1][0] == '-') return {};
    std::string names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        if (sub->get_name() == argv[1]) return {};
        names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    return "unknown command '" + printable(argv[1]) + "' (commands: " + names + ")";
}

// CLI11 reports a missing required argument before an unknown option; the unknown option is
// usually the cause (a misspelt --output), so it is named first.
std::string unknown_option(CLI::App& app, int argc, char** argv) {
    const CLI::App* command = nullptr;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        if (argc > 1 && sub->get_name() == argv[1]) command = sub;
    if (command == nullptr) return {};
    for (int i = 2; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--") break;
        if (arg.size() < 2 || arg[0] != '-' || looks_negative_number(argv[i])) continue;
        const std::string name(arg.substr(0, arg.find('=')));
        if (command->get_option_no_throw(name) == nullptr && name != "-h" && name != "--help")
            return "unknown option '" + printable(name) + "' for " + command->get_name() + " (roundscope " +
                   command->get_name() + " --help lists them)";
    }
    return {};
}

std::string parse_error_message(CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr || dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr)
        if (std::string unknown = unknown_option(app, argc, argv); !unknown.empty()) return unknown;
    // An option's own value that fails its check is not such a VALUE.
    const bool misread = dynamic_cast<const CLI::ValidationError*>(&e) == nullptr;
    for (int i = 2; misread && i < argc; ++i) {
        if (std::string_view(argv[i]) == "--") break;
        if (looks_negative_number(argv[i]))
            return std::string(e.what()) + " (put `--` before values that start with '-', as in: cast --to e4m3 -- " +
                   printable(argv[i]) + ")";
    }
    return e.what();
}

// Output buffered for standard output is written at exit; a failed write (a full disk,
// /dev/full, a closed pipe's EPIPE) must not pass for success.
int flush_standard_output(int code, std::FILE* errors) {
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
        if (code == 2) return code;  // already reported (fmt throws on a failed write)
        const int err = errno;
        return error(errors,
                     std::string("standard output: write failed: ") + (err != 0 ? std::strerror(err) : "I/O error"));
    }
    return code;
}

}  // namespace

void add_all_commands(CLI::App& app) {
    app.require_subcommand(1);
    app.set_version_flag("--version", "roundscope " ROUNDSCOPE_VERSION);
    add_formats_command(app);
    add_cast_command(app);
    add_inspect_command(app);
    add_mx_command(app);
    add_mma_command(app);
    add_probe_command(app);
    add_truth_command(app);
    add_attention_command(app);
    add_recipes_command(app);
    add_crosscheck_command(app);
    add_pcollapse_command(app);
    add_leak_command(app);
    add_headroom_command(app);
    add_bias_command(app);
    add_demo_command(app);
    add_attribute_command(app);
    add_compare_command(app);
    add_fit_command(app);
    add_check_command(app);
    add_report_command(app);
    add_completion_command(app);
}

namespace {

// A library argument as the flag that carries it: k_sink -> --k-sink; settings -> --set, presets ->
// --from.
std::string flag_of(const std::string& argument) {
    if (argument == "settings") return "--set";
    if (argument == "presets") return "--from";
    std::string flag = "--" + argument;
    for (char& c : flag)
        if (c == '_') c = '-';
    return flag;
}

}  // namespace

namespace {

// "create directories /tmp/x/y: File name too long": the operation, the path (made printable and
// short) and the reason, from what libstdc++ says ("filesystem error: cannot create directories:
// File name too long [/tmp/x/y]").
std::string filesystem_message(const std::filesystem::filesystem_error& e) {
    std::string operation = e.what();
    for (const std::string prefix : {"filesystem error: ", "cannot "})
        if (operation.starts_with(prefix)) operation = operation.substr(prefix.size());
    operation = operation.substr(0, operation.find(':'));  // "create directories", "status", ...
    std::string paths = printable(e.path1().string(), 160);
    if (!e.path2().empty()) paths += " -> " + printable(e.path2().string(), 160);
    return operation + " " + paths + ": " + e.code().message();
}

}  // namespace

RunOutcome run_app_outcome(CLI::App& app, int argc, char** argv) {
    if (std::string m = command_name_error(app, argc, argv); !m.empty()) return {.code = 2, .message = m};
    try {
        app.parse(argc, argv);
    } catch (const CLI::Success& e) {  // --help, --version
        return {.code = app.exit(e)};
    } catch (const CLI::ParseError& e) {
        return {2, parse_error_message(app, e, argc, argv)};
    } catch (const ExitCode& e) {
        return {.code = e.code};
    } catch (const api::ArgumentError& e) {  // the library names the argument; the command line, its flag
        return {2, flag_of(e.argument()) + ": " + e.detail()};
    } catch (const FileError& e) {
        return {2, e.what(), RunOutcome::Failure::file};
    } catch (const Error& e) {
        return {2, e.what()};
    } catch (const std::bad_alloc&) {
        return {2, "out of memory (the run needs more memory than this machine has)", RunOutcome::Failure::memory};
    } catch (const std::filesystem::filesystem_error& e) {  // a folder made, listed, renamed: its path and the why
        return {2, filesystem_message(e), RunOutcome::Failure::file};
    } catch (const std::system_error& e) {  // fmt's failed writes to standard output
        return {2, std::string("standard output: write failed: ") + e.code().message(), RunOutcome::Failure::file};
    } catch (const std::exception& e) {
        return {2, std::string("internal: ") + e.what()};
    }
    return {};
}

int run_app(CLI::App& app, int argc, char** argv, std::FILE* errors) {
    const RunOutcome outcome = run_app_outcome(app, argc, argv);
    if (!outcome.message.empty()) error(errors, outcome.message);
    return flush_standard_output(outcome.code, errors);
}

int run_cli(int argc, char** argv) {
    CLI::App app{"roundscope: what low-precision arithmetic does inside attention, bit for bit"};
    add_all_commands(app);
    return run_app(app, argc, argv, stderr);
}

}  // namespace roundscope::cli
