#include "api/check_call.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>

#include "api/argument_checks.hpp"
#include "api/argument_error.hpp"
#include "api/markup.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::api {
namespace {

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

}  // namespace

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

namespace {

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

void check_tolerance(const analysis::DumpTolerance& t) {
    if (t.max_ulp)
        check_in("max_ulp", static_cast<std::int64_t>(std::min<std::uint64_t>(*t.max_ulp, INT64_MAX)), ranges::max_ulp);
    if (t.max_row_ulp) check_in("max_row_ulp", *t.max_row_ulp, ranges::tolerance);
    if (t.min_match) check_in("min_match", *t.min_match, FiniteRange{0, 1});
    if (t.close) {
        check_in("rtol", t.close->rtol, ranges::tolerance);
        check_in("atol", t.close->atol, ranges::tolerance);
    }
}

}  // namespace

CheckAnswer check(const CheckRequest& request, const std::function<void(const CheckedCase&)>& on_case) {
    check_in("threads", request.threads, ranges::threads);
    check_tolerance(request.tolerance);
    if (request.junit && request.junit->empty()) throw ArgumentError("junit", "must not be empty");
    const std::vector<std::string> paths = tensor_files(request.dir);
    if (request.junit) check_output_path("junit", *request.junit, paths);
    struct Golden {
        TensorFile file;
        analysis::GoldenKind kind;
    };
    std::vector<Golden> golden;
    CheckAnswer a;
    for (const std::string& path : paths) {
        TensorFile file = read_tensor_file(path);
        const std::optional<analysis::GoldenKind> kind = analysis::golden_kind(file);
        if (!kind) {
            a.skipped.push_back(path);
            continue;
        }
        analysis::validate_golden(file, *kind);
        golden.push_back({std::move(file), *kind});
    }
    if (golden.empty())
        throw Error(request.dir +
                    ": no golden files (MMA tiles, conversion digests, or attention dumps naming a recipe) in " +
                    std::to_string(paths.size()) + " .safetensors file(s)");
    for (const Golden& g : golden) {
        const auto start = std::chrono::steady_clock::now();
        std::vector<analysis::GoldenCase> results =
            analysis::check_golden(g.file, g.kind, request.threads, request.tolerance);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                               static_cast<double>(results.size());
        for (analysis::GoldenCase& r : results) {
            a.cases.push_back({g.file.path, g.kind, std::move(r), seconds});
            if (on_case) on_case(a.cases.back());
        }
    }
    a.failed = std::count_if(a.cases.begin(), a.cases.end(), [](const CheckedCase& c) { return !c.result.passed; });
    if (request.junit) write_text(*request.junit, junit_xml(a.cases, a.skipped));
    nlohmann::json checks = nlohmann::json::array();
    for (const CheckedCase& c : a.cases)
        checks.push_back({{"file", c.file},
                          {"kind", kind_name(c.kind)},
                          {"name", c.result.name},
                          {"passed", c.result.passed},
                          {"matched", c.result.matched},
                          {"total", c.result.total},
                          {"detail", c.result.detail},
                          {"seconds", c.seconds}});
    a.json = {{"dir", request.dir},
              {"checks", checks},
              {"passed", static_cast<std::int64_t>(a.cases.size()) - a.failed},
              {"failed", a.failed},
              {"skipped", a.skipped}};
    return a;
}

}  // namespace roundscope::api
