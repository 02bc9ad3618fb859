#pragma once
// Golden files checked as a library call: every golden file under a folder (MMA tiles,
// conversion digests, attention dumps naming a recipe) bit for bit, or attention dumps within
// tolerances; optionally a JUnit file for CI.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/golden_check.hpp"

namespace roundscope::api {

struct CheckRequest {
    std::string dir;
    std::optional<std::string> junit;   // also the results as JUnit XML to this file
    analysis::DumpTolerance tolerance;  // attention dumps: max_ulp, max_row_ulp, min_match, close (rtol, atol)
    int threads = 0;
};

struct CheckedCase {
    std::string file;
    analysis::GoldenKind kind;
    analysis::GoldenCase result;
    double seconds = 0;
};

struct CheckAnswer {
    std::vector<CheckedCase> cases;
    std::vector<std::string> skipped;  // .safetensors files that are not golden
    std::int64_t failed = 0;
    nlohmann::json json;  // dir, checks, passed, failed, skipped
};

/// The .safetensors files under `dir`, by path (FileError where it is not a folder).
std::vector<std::string> tensor_files(const std::string& dir);

/// Every check; `on_case` (where given) hears each case as it ends.
CheckAnswer check(const CheckRequest& request, const std::function<void(const CheckedCase&)>& on_case = {});

}  // namespace roundscope::api
