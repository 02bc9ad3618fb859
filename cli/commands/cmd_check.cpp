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
#include "cli/analysis_flags.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/markup.hpp"
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

struct CheckedCase {
    std::string file;
    analysis::GoldenKind kind;
    analysis::GoldenCase result;
    double seconds = 0;
};

const char* kind_name(analysis::GoldenKind k) {
    switch (k) {
        case analysis::GoldenKind::mma_tiles:
            return "mma";
        case analysis::GoldenKind::conversion_digests:
            return "conversions";
        case analysis::GoldenKind::attention_dump:
            return "attention";
    }
    return "";
}

/// The .safetensors files under `dir`, by path.
std::vector<std::string> tensor_files(const std::string& dir) {
    std::error_code error;
    if (!std::filesystem::exists(dir, error)) throw FileError(dir + ": no such folder");
    if (!std::filesystem::is_directory(dir, error)) throw Error(dir + ": not a directory");
    std::vector<std::string> files;
    for (std::filesystem::recursive_directory_iterator it(dir, error), end; !error && it != end; it.increment(error))
        if (it->is_regular_file(error) && it->path().extension() == ".safetensors")
            files.push_back(it->path().string());
    if (error) throw FileError(dir + ": " + error.message());
    std::sort(files.begin(), files.end());
    return files;
}

/// JUnit XML, as CI systems read it: one test case per check, named by file and what it checked.
std::string junit_xml(const std::vector<CheckedCase>& cases, const std::vector<std::string>& skipped) {
    const auto failures =
        std::count_if(cases.begin(), cases.end(), [](const CheckedCase& c) { return !c.result.passed; });
    double seconds = 0;
    for (const CheckedCase& c : cases) seconds += c.seconds;
    std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    xml += fmt::format(
        "<testsuite name=\"roundscope check\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
        cases.size() + skipped.size(), failures, skipped.size(), seconds);
    for (const CheckedCase& c : cases) {
        xml += fmt::format("  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\"", markup_escaped(c.file),
                           markup_escaped(c.result.name), c.seconds);
        if (c.result.passed) {
            xml += "/>\n";
            continue;
        }
        xml += fmt::format(">\n    <failure message=\"{} of {} differ\">{}</failure>\n  </testcase>\n",
                           c.result.total - c.result.matched, c.result.total, markup_escaped(c.result.detail));
    }
    for (const std::string& s : skipped)
        xml += fmt::format("  <testcase classname=\"{}\" name=\"not a golden file\">\n    <skipped/>\n  </testcase>\n",
                           markup_escaped(s));
    return xml + "</testsuite>\n";
}

void check(const CheckArgs& a) {
    const std::vector<std::string> paths = tensor_files(a.dir);
    if (!a.junit.empty()) check_output("--junit", a.junit, paths);
    struct Golden {
        TensorFile file;
        analysis::GoldenKind kind;
    };
    std::vector<Golden> golden;
    std::vector<std::string> skipped;
    for (const std::string& path : paths) {
        TensorFile file = read_input(path);
        const std::optional<analysis::GoldenKind> kind = analysis::golden_kind(file);
        if (!kind) {
            skipped.push_back(path);
            continue;
        }
        analysis::validate_golden(file, *kind);
        golden.push_back({std::move(file), *kind});
    }
    if (golden.empty())
        throw Error(a.dir +
                    ": no golden files (MMA tiles, conversion digests, or attention dumps naming a recipe) in " +
                    std::to_string(paths.size()) + " .safetensors file(s)");

    std::vector<CheckedCase> cases;
    for (const Golden& g : golden) {
        const auto start = std::chrono::steady_clock::now();
        std::vector<analysis::GoldenCase> results = analysis::check_golden(g.file, g.kind, a.threads, a.tolerance);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                               static_cast<double>(results.size());
        for (analysis::GoldenCase& r : results) {
            cases.push_back({g.file.path, g.kind, std::move(r), seconds});
            const CheckedCase& c = cases.back();
            if (!a.json)
                fmt::print("{} {}: {} ({} of {}){}\n", c.result.passed ? "PASS" : "FAIL", c.file, c.result.name,
                           c.result.matched, c.result.total, c.result.detail.empty() ? "" : ": " + c.result.detail);
        }
    }
    const auto failed =
        std::count_if(cases.begin(), cases.end(), [](const CheckedCase& c) { return !c.result.passed; });
    if (!a.junit.empty()) {
        const std::string xml = junit_xml(cases, skipped);
        write_text(a.junit, xml);
    }
    if (a.json) {
        nlohmann::json checks = nlohmann::json::array();
        for (const CheckedCase& c : cases)
            checks.push_back({{"file", c.file},
                              {"kind", kind_name(c.kind)},
                              {"name", c.result.name},
                              {"passed", c.result.passed},
                              {"matched", c.result.matched},
                              {"total", c.result.total},
                              {"detail", c.result.detail},
                              {"seconds", c.seconds}});
        print_json({{"dir", a.dir},
                    {"checks", checks},
                    {"passed", static_cast<std::int64_t>(cases.size()) - failed},
                    {"failed", failed},
                    {"skipped", skipped}});
    } else {
        fmt::print("{} of {} checks passed{}\n", static_cast<std::int64_t>(cases.size()) - failed, cases.size(),
                   skipped.empty() ? "" : fmt::format(" ({} file(s) not golden, skipped)", skipped.size()));
    }
    if (failed > 0) throw ExitCode{1};
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
        ->check(integer_in(0, std::numeric_limits<std::int64_t>::max()));
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
