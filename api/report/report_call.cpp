#include "api/report/report_call.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "api/argument_checks.hpp"
#include "api/argument_error.hpp"
#include "api/python_script.hpp"
#include "api/report/fitted_recipe.hpp"
#include "api/report/report_cache.hpp"
#include "api/report/report_folder.hpp"
#include "api/report/report_output.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "lib/parallel.hpp"

namespace roundscope::api {
namespace {

// A shard I/N: the tasks it runs are those whose index is I - 1 modulo N.
struct Shard {
    std::size_t index = 0, count = 1;
};

Shard parse_shard(const std::string& text) {
    unsigned long long i = 0, n = 0;
    char end = 0;
    if (std::sscanf(text.c_str(), "%llu/%llu%c", &i, &n, &end) != 2 || i < 1 || i > n || n > (1u << 20) ||
        text.find_first_not_of("0123456789/") != std::string::npos)
        throw ArgumentError("shard", "'" + printable(text) + "' is not I/N with 1 <= I <= N <= 1048576 (e.g. 3/8)");
    return {static_cast<std::size_t>(i - 1), static_cast<std::size_t>(n)};
}

// Is `name` a TensorBoard run folder's name: one path component, printable, as TensorBoard lists it?
bool is_run_name(const std::string& name) {
    const bool shown = std::all_of(name.begin(), name.end(), [](char c) { return c >= 0x20 && c != 0x7f; });
    return !name.empty() && name != "." && name != ".." && name.find_first_of("/\\") == std::string::npos && shown;
}

// The run's name where none is given: the dumps' folder's name (else "report").
std::string default_run_name(const std::string& dir) {
    std::filesystem::path p = std::filesystem::absolute(dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    const std::string name = p.filename().string();
    return is_run_name(name) ? name : "report";
}

void check_numbers(const ReportRequest& r) {
    check_in("threads", r.threads, ranges::threads);
    check_in("k_sink", r.k_sink, ranges::k_sink);
    check_in("leak_tokens", static_cast<std::int64_t>(std::min<std::uint64_t>(r.leak_tokens, INT64_MAX)),
             ranges::leak_tokens);
    check_in("headroom_within", r.headroom_within, ranges::headroom_within);
    if (r.rows != 0)
        check_in("rows", static_cast<std::int64_t>(std::min<std::uint64_t>(r.rows, INT64_MAX)), ranges::report_rows);
    if (r.seed && r.rows == 0) throw ArgumentError("seed", "seeds the row sample: only with rows");
}

// The options the request's analyses run with (what the task keys depend on).
ReportOptions options_of(const ReportRequest& r) {
    check_numbers(r);
    ReportOptions options;
    for (const std::string& name : r.recipes) {
        emu::AttentionRecipe recipe = recipe_of({name, r.settings});
        emu::validate(recipe);
        options.recipes.push_back(recipe);
    }
    if (r.fitted) options.recipes.push_back(fitted_recipe(*r.fitted));
    options.k_sink = r.k_sink;
    options.leak_tokens = r.leak_tokens, options.headroom_emulate_within = r.headroom_within;
    options.rows = r.rows, options.seed = r.seed.value_or(0);
    options.attribute_stages = r.attribute_stages;
    return options;
}

// Before any work: what the options cannot do together, and what an output needs.
void check_outputs(const ReportRequest& r, bool engine) {
    if (r.shard && engine) throw ArgumentError("shard", "not with the task list or a task's run");
    if (r.tensorboard && (engine || r.shard))
        throw ArgumentError("tensorboard",
                            "only where the report is gathered (not with a shard, the task list or "
                            "a task's run)");
    if (!r.tensorboard && (r.tensorboard_run || r.tensorboard_heads))
        throw ArgumentError(r.tensorboard_heads ? "tensorboard_heads" : "tensorboard_run",
                            "only with a TensorBoard folder (tensorboard)");
    if (r.tensorboard_run && !is_run_name(*r.tensorboard_run))
        throw ArgumentError("tensorboard_run", "'" + printable(*r.tensorboard_run) +
                                                   "' is not a folder name (one path component, printable)");
    if (r.tensorboard) {
        const std::string& logdir = *r.tensorboard;
        if (logdir.empty()) throw ArgumentError("tensorboard", "must not be empty");
        if (std::filesystem::exists(logdir) && !std::filesystem::is_directory(logdir))
            throw ArgumentError("tensorboard", logdir + " is a file, not a folder for event files");
        // the folder (or the nearest one above it that exists, where it will be made) writable
        std::filesystem::path there = std::filesystem::absolute(logdir);
        while (!std::filesystem::exists(there) && there.has_parent_path() && there != there.parent_path())
            there = there.parent_path();
        std::string probe = (there / ".roundscope-probe-XXXXXX").string();  // a folder made there and removed
        const CleanupSignalsHeld held;                                      // until it is gone again
        if (::mkdtemp(probe.data()) == nullptr)
            throw ArgumentError("tensorboard",
                                logdir + ": cannot make a folder in " + there.string() + ": " + std::strerror(errno));
        std::filesystem::remove(probe);
        check_python_module("--tensorboard", "tensorboard");
    }
    if (r.html && !engine && !r.shard) check_python_module("report.html (or --no-html)", "plotly");
}

// What the report writes into OUT, checked before any work: a folder where a file goes, or the
// other way round, would stop it after every task ran.
void check_out(const ReportRequest& r) {
    if (std::filesystem::exists(r.out) && !std::filesystem::is_directory(r.out))
        throw ArgumentError("out", r.out + " is a file, not a folder for the report");
    if (std::filesystem::weakly_canonical(r.out) == std::filesystem::weakly_canonical(r.dir))
        throw ArgumentError("out", "the report's folder cannot be " + r.dir + " itself (its dumps would be left out)");
    for (const char* name : {"report.json", "report.html"}) {
        const std::filesystem::path p = std::filesystem::path(r.out) / name;
        if (std::filesystem::exists(p) && !std::filesystem::is_regular_file(p))
            throw ArgumentError("out", p.string() + " is there and not a file; move it away");
    }
    if (const std::filesystem::path p = std::filesystem::path(r.out) / "cache";
        std::filesystem::exists(p) && !std::filesystem::is_directory(p))
        throw ArgumentError("out", p.string() + " is there and not a folder; move it away");
    check_report_folder(r.out);  // layers/: a real folder of the report's own, or none
}

struct Scanned {
    ReportOptions options;
    std::vector<DumpFile> files;
    std::vector<ReportTask> tasks;
};

// The dumps and their tasks (a task run for an engine reads its own file only, as the list
// names it, not the folder).
Scanned scan(const ReportRequest& r, const std::optional<std::string>& task_file, bool engine) {
    Scanned s;
    s.options = options_of(r);
    check_out(r);
    check_outputs(r, engine);
    s.files = task_file ? std::vector<DumpFile>{scan_dump(*task_file, r.dir, s.options.recipes)}
                        : scan_dumps(r.dir, r.out, s.options.recipes);
    check_dumps(s.files, s.options);
    s.tasks = report_tasks(s.files, s.options);
    return s;
}

}  // namespace

nlohmann::json report_task_list(const ReportRequest& request) {
    const Scanned s = scan(request, std::nullopt, true);
    nlohmann::json list = nlohmann::json::array();
    for (const ReportTask& t : s.tasks)
        list.push_back({{"key", t.key}, {"file", s.files[t.file].path}, {"head", t.head}});
    return {{"dir", request.dir}, {"tasks", list}};
}

nlohmann::json report_run_task(const ReportRequest& request, const std::string& key,
                               const std::optional<std::string>& task_file) {
    if (key.empty()) throw ArgumentError("run_task", "must not be empty");
    if (task_file && task_file->empty()) throw ArgumentError("task_file", "must not be empty");
    const Scanned s = scan(request, task_file, true);
    for (const ReportTask& t : s.tasks)
        if (t.key == key) return run_task(s.files[t.file], t, s.options, request.threads);
    throw ArgumentError(
        "run_task",
        "no task " + key + " in " + (task_file ? *task_file + " as it is now" : request.dir) + " (see the task list)");
}

nlohmann::json report(const ReportRequest& request, const ReportProgress& progress) {
    const Shard shard = request.shard ? parse_shard(*request.shard) : Shard{};
    const Scanned s = scan(request, std::nullopt, false);
    const std::vector<DumpFile>& files = s.files;
    const std::vector<ReportTask>& tasks = s.tasks;
    const auto start = std::chrono::steady_clock::now();
    const std::filesystem::path cache = std::filesystem::path(request.out) / "cache";
    std::error_code ec;
    std::filesystem::create_directories(cache, ec);
    if (ec) throw FileError(cache.string() + ": " + ec.message());
    // Results go to the cache as they are computed and are read back a layer at a time when the
    // report is written: memory holds one layer's results, not the model's.
    std::vector<std::size_t> pending;
    std::size_t recomputed = 0, mine = 0;  // entries there that were not this task's result; this shard's tasks
    for (std::size_t i = 0; i < tasks.size(); ++i) {
        if (i % shard.count != shard.index) continue;
        ++mine;
        const CacheEntry c = read_cache_entry(cache_entry_path(cache, tasks[i]), tasks[i], files[tasks[i].file]);
        if (c.state == CacheEntry::invalid) ++recomputed;
        if (c.state != CacheEntry::valid || request.no_cache) pending.push_back(i);
    }
    // Many tasks: one per thread, each single-threaded; few: one at a time on every thread.
    const int threads = resolve_threads(request.threads);
    const bool task_parallel = pending.size() >= static_cast<std::size_t>(threads);
    if (progress.start) progress.start(pending.size());
    parallel_for(pending.size(), 1, task_parallel ? threads : 1, [&](std::size_t begin, std::size_t end) {
        for (std::size_t p = begin; p < end; ++p) {
            const ReportTask& t = tasks[pending[p]];
            write_cache_entry(cache_entry_path(cache, t),
                              run_task(files[t.file], t, s.options, task_parallel ? 1 : threads));
            if (progress.done) progress.done();
        }
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::size_t cached_tasks = mine - pending.size();
    if (request.shard)
        return {{"shard", *request.shard},  {"tasks", mine},      {"all_tasks", tasks.size()}, {"cached", cached_tasks},
                {"recomputed", recomputed}, {"seconds", seconds}, {"cache", cache.string()}};
    // An entry changed since it was checked or written (another run sharing OUT) is recomputed.
    const std::string json_path =
        write_report(request.dir, request.out, files, tasks, s.options, [&](const ReportTask& t) {
            const std::filesystem::path entry = cache_entry_path(cache, t);
            CacheEntry c = read_cache_entry(entry, t, files[t.file]);
            if (c.state == CacheEntry::valid) return std::move(c.result);
            nlohmann::json result = run_task(files[t.file], t, s.options, threads);
            write_cache_entry(entry, result);
            return result;
        });
    const std::string html_path = (std::filesystem::path(request.out) / "report.html").string();
    if (request.html) {
        AtomicFile page(html_path);
        run_python_module("report.html", "_report_page", {json_path, page.temporary_path()});
        page.commit();
    }
    if (request.tensorboard) {
        std::vector<std::string> args{json_path, *request.tensorboard, "--run",
                                      request.tensorboard_run.value_or(default_run_name(request.dir))};
        if (request.tensorboard_heads) args.push_back("--heads");
        run_python_module("--tensorboard", "_report_tensorboard", args);
    }
    return {{"report", json_path},
            {"html", request.html ? nlohmann::json(html_path) : nlohmann::json()},
            {"tensorboard", request.tensorboard ? nlohmann::json(*request.tensorboard) : nlohmann::json()},
            {"files", files.size()},
            {"tasks", tasks.size()},
            {"cached", cached_tasks},
            {"recomputed", recomputed},
            {"seconds", seconds}};
}

}  // namespace roundscope::api
