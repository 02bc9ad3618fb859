#pragma once
// `roundscope report`'s cache: OUT/cache/KEY.json holds the result of the task KEY names
// (report_tasks.hpp). An entry is believed only when it is a regular file holding this very
// task's result; anything else there is never opened or believed but recomputed and replaced.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "api/report/report_tasks.hpp"

namespace roundscope::api {

/// What the cache holds for a task: nothing, this task's result, or an entry that is not (a
/// folder, FIFO or link in its place, unreadable or unparsable JSON, another task's result, a
/// part missing).
struct CacheEntry {
    enum { missing, valid, invalid } state = missing;
    nlohmann::json result;
};

std::filesystem::path cache_entry_path(const std::filesystem::path& cache, const ReportTask& task);

CacheEntry read_cache_entry(const std::filesystem::path& path, const ReportTask& task, const DumpFile& file);

/// Writes `result` under `path` atomically, removing whatever else stands there (a FIFO, a folder).
void write_cache_entry(const std::filesystem::path& path, const nlohmann::json& result);

}  // namespace roundscope::api
