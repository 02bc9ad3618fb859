#pragma once
// The report as library calls: every analysis on every attention dump under a folder, files and
// heads in parallel, each task's result cached in OUT/cache by file content and options, gathered
// a layer at a time into OUT/layers/ and OUT/report.json (report/report_output.hpp), the page
// OUT/report.html with Plotly's script beside it (roundscope._report_page), and with a
// TensorBoard folder, its event files in the run folder LOGDIR/RUN (roundscope._report_tensorboard).
// A shard runs every N-th task into the cache; the task list and one task's run serve a
// distributed engine (python/roundscope/_report.py). Either way a final report gathers them.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/recipe_choice.hpp"
#include "api/report/report_tasks.hpp"

namespace roundscope::api {

struct ReportRequest {
    std::string dir, out = "roundscope-report";
    std::vector<std::string> recipes{"fa2-bf16", "fa3-fp8"};
    std::vector<std::string> settings;  // KEY=VALUE, for every recipe
    std::optional<std::string> fitted;  // roundscope fit --json's file: its best recipe compared too (not --set's)
    int k_sink = 1;
    std::uint64_t leak_tokens = ReportOptions{}.leak_tokens;
    double headroom_within = ReportOptions{}.headroom_emulate_within;
    std::uint64_t rows = 0;             // 0: every row
    std::optional<std::uint64_t> seed;  // of the row sample (only with rows)
    bool attribute_stages = false, no_cache = false, html = true;
    std::optional<std::string> shard;        // I/N: that share of the tasks into the cache
    std::optional<std::string> tensorboard;  // a folder for event files
    std::optional<std::string> tensorboard_run;
    bool tensorboard_heads = false;
    int threads = 0;
};

/// Heard as the report's tasks run: start(total) once, then done() after each.
struct ReportProgress {
    std::function<void(std::size_t)> start;
    std::function<void()> done;
};

/// {"dir", "tasks": [{"key", "file", "head"}]}: every task, in the order a shard counts them.
nlohmann::json report_task_list(const ReportRequest& request);

/// One task's result, what OUT/cache/KEY.json holds. With `task_file` (the task's file as the
/// list names it) only that file is read; an Error naming `key` where there is no such task.
nlohmann::json report_run_task(const ReportRequest& request, const std::string& key,
                               const std::optional<std::string>& task_file);

/// The report (or with a shard, that share of its tasks): the summary {report, html,
/// tensorboard, files, tasks, cached, recomputed, seconds} (a shard's: {shard, tasks,
/// all_tasks, cached, recomputed, seconds, cache}).
nlohmann::json report(const ReportRequest& request, const ReportProgress& progress = {});

}  // namespace roundscope::api
