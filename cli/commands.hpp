#pragma once
// Each subcommand registers itself on the CLI11 app; its callback does the work and may throw
// roundscope::Error, which main() turns into `roundscope: error: ...` and exit code 2.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

namespace roundscope::cli {

/// Thrown by a command that ran to the end but must exit non-zero without an error message
/// (a check that found mismatches exits 1); main() returns `code`.
struct ExitCode {
    int code;
};

/// The roundscope app with every command registered (what main and the option fuzzer parse).
void add_all_commands(CLI::App& app);

/// How a run ended: the exit code of docs/cli.md and, for 2, the one-line message and what failed.
struct RunOutcome {
    enum class Failure { usage, file, memory };
    int code = 0;
    std::string message;
    Failure failure = Failure::usage;  // with a message: a bad argument or input, the OS on a file, memory
};

/// Parses argv into APP (made by add_all_commands) and runs the chosen command; prints nothing
/// of its own failure (what run_app and run_in_process build on).
RunOutcome run_app_outcome(CLI::App& app, int argc, char** argv);

/// Parses argv into APP (made by add_all_commands) and runs the chosen command; returns the
/// exit code of docs/cli.md, having written any error as one line to ERRORS.
int run_app(CLI::App& app, int argc, char** argv, std::FILE* errors);

/// run_app on the full app, errors to stderr: what main() does.
int run_cli(int argc, char** argv);

void add_formats_command(CLI::App& app);
void add_cast_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_mx_command(CLI::App& app);
void add_mma_command(CLI::App& app);
void add_probe_command(CLI::App& app);
void add_truth_command(CLI::App& app);
void add_attention_command(CLI::App& app);
void add_recipes_command(CLI::App& app);
void add_crosscheck_command(CLI::App& app);
void add_pcollapse_command(CLI::App& app);
void add_leak_command(CLI::App& app);
void add_headroom_command(CLI::App& app);
void add_bias_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_attribute_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_fit_command(CLI::App& app);
void add_check_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_completion_command(CLI::App& app);

}  // namespace roundscope::cli
