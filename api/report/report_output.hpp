#pragma once
// `roundscope report`'s output, gathered from the tasks' results one layer at a time so that it
// stays usable at a real model's scale (10^5 heads): OUT/layers/layerL.json holds the results of
// that layer's tasks in full (`layer-none.json`: the dumps without a layer in their metadata),
// and OUT/report.json the summary: the options, the files, the layers with their files and
// counts, and the delta error of each layer and head over the steps. Neither says anything
// about the run (what came from the cache, how long it took), so that a sharded, distributed
// or cached run writes the same bytes.
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/report/report_tasks.hpp"

namespace roundscope::api {

/// Writes the layer files and then report.json, asking `result_of` for each task's result (a
/// layer's at a time), into a folder of this run's, then puts them in place of `out`'s whole
/// (report_folder.hpp: the earlier report's layers go, with nothing else). Returns report.json's
/// path.
std::string write_report(const std::string& dir, const std::filesystem::path& out, const std::vector<DumpFile>& files,
                         const std::vector<ReportTask>& tasks, const ReportOptions& options,
                         const std::function<nlohmann::json(const ReportTask&)>& result_of);

/// The name of a layer's file under OUT: layers/layerL.json, or layers/layer-none.json.
std::string layer_file_name(const std::optional<std::int64_t>& layer);

}  // namespace roundscope::api
