// `roundscope check DIR [--junit OUT.xml] [--max-ulp N] [--max-row-ulp X] [--min-match F]
// [--rtol R --atol A] [--json] [--threads N]`: every golden file under DIR checked bit for bit
// (analysis/golden_check.hpp), or an attention dump within the tolerances given; exit 1 on any
// failure. Every file is read
// and validated before the first check runs, so a corrupt or unusable file stops the run (exit
// 2) before any work.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/golden_check.hpp"
#include "api/check_call.hpp"
#include "cli/analysis_flags.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/option_checks.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"

namespace roundscope::cli {
namespace {

struct CheckArgs {
    std::string dir, junit;
    bool json = false;
    int threads = 0;
    analysis::DumpTolerance tolerance;
    std::optional<double> rtol, atol;
};

void check(const CheckArgs& a) {
    if (!a.junit.empty()) check_output("--junit", a.junit, api::tensor_files(a.dir));
    api::CheckRequest request;
    request.dir = a.dir;
    if (!a.junit.empty()) request.junit = a.junit;
    request.tolerance = a.tolerance, request.threads = a.threads;
    const api::CheckAnswer answer = api::check(request, [&](const api::CheckedCase& c) {
        if (!a.json)
            fmt::print("{} {}: {} ({} of {}){}\n", c.result.passed ? "PASS" : "FAIL", c.file, c.result.name,
                       c.result.matched, c.result.total, c.result.detail.empty() ? "" : ": " + c.result.detail);
    });
    if (a.json)
        print_json(answer.json);
    else
        fmt::print(
            "{} of {} checks passed{}\n", static_cast<std::int64_t>(answer.cases.size()) - answer.failed,
            answer.cases.size(),
            answer.skipped.empty() ? "" : fmt::format(" ({} file(s) not golden, skipped)", answer.skipped.size()));
    if (answer.failed > 0) throw ExitCode{1};
}

}  // namespace

void add_check_command(CLI::App& app) {
    auto* cmd =
        app.add_subcommand("check", "Every golden file under DIR checked bit for bit; exit 1 on any difference");
    auto a = std::make_shared<CheckArgs>();
    cmd->add_option("DIR", a->dir,
                    "Folder of golden files: MMA tiles, conversion digests, attention dumps naming a recipe")
        ->required();
    cmd->add_option("--junit", a->junit, "Also write the results as JUnit XML to this file")->check(non_empty());
    // Tolerances for attention dumps (MMA tiles and digests stay bit for bit); any one given
    // replaces "every bit" with all of those given.
    cmd->add_option("--max-ulp", a->tolerance.max_ulp,
                    "Attention dumps: pass where no output element is more than N ulps from the recipe's")
        ->check(integer_in(api::ranges::max_ulp));
    cmd->add_option("--max-row-ulp", a->tolerance.max_row_ulp,
                    "Attention dumps: pass where no element differs by more than X ulps of its row's largest value")
        ->check(finite_in(0, std::numeric_limits<double>::max()));
    cmd->add_option("--min-match", a->tolerance.min_match,
                    "Attention dumps: pass where at least this share (0 to 1) of each output's bit patterns match")
        ->check(finite_in(0, 1));
    auto* rtol = cmd->add_option("--rtol", a->rtol,
                                 "Attention dumps: pass where |kernel - recipe| <= atol + rtol |recipe| everywhere "
                                 "(torch.testing.assert_close; with --atol)")
                     ->check(finite_in(0, std::numeric_limits<double>::max()));
    auto* atol = cmd->add_option("--atol", a->atol, "The absolute tolerance beside --rtol")
                     ->check(finite_in(0, std::numeric_limits<double>::max()));
    rtol->needs(atol);
    atol->needs(rtol);
    add_output_flags(cmd, a->json, a->threads);
    cmd->footer(
        "Example: roundscope check tests/data/golden --junit golden.xml\n"
        "         roundscope check my_kernel_dumps --min-match 0.999 --max-row-ulp 2\n");
    cmd->callback([a] {
        if (a->rtol) a->tolerance.close = analysis::Tolerance{*a->rtol, *a->atol};
        check(*a);
    });
}

}  // namespace roundscope::cli
