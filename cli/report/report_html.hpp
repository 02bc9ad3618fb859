#pragma once
// report.html: the report's JSON (cmd_report.cpp) as one self-contained page, plots as inline
// SVG (no script, no network), tables of the last step per layer and head.
#include <string>

#include <nlohmann/json.hpp>

namespace roundscope::cli {

std::string report_html(const nlohmann::json& report);

}  // namespace roundscope::cli
