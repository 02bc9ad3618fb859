// `roundscope report DIR [-o OUT] [--recipe NAME]... [--k-sink K] [--threads N] [--json]`: every
// analysis on every attention dump under DIR (cli/report/report_tasks.hpp), files and heads in
// parallel, each task's result cached in OUT/cache by file content and options, gathered a layer
// at a time into OUT/layers/ and OUT/report.json (cli/report/report_output.hpp), the page
// OUT/report.html with Plotly's script beside it (roundscope._report_page), and with
// --tensorboard LOGDIR into TensorBoard's event files in the run folder LOGDIR/RUN
// (roundscope._report_tensorboard). `--shard I/N`
// runs every N-th task into the cache; `--list-tasks` and `--run-task KEY` expose the tasks to
// a distributed engine (python/roundscope/_report.py). Either way a final `report` gathers them.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/analysis_flags.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/option_checks.hpp"
#include "cli/python_script.hpp"
#include "cli/recipe_flags.hpp"
#include "cli/report/report_cache.hpp"
#include "cli/report/report_folder.hpp"
#include "cli/report/report_output.hpp"
#include "cli/report/report_tasks.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "lib/parallel.hpp"

namespace roundscope::cli {
namespace {

struct ReportArgs {
    std::string dir, out = "roundscope-report", run_task_key, task_file, shard, tensorboard, tensorboard_run;
    std::vector<std::string> recipes{"fa2-bf16", "fa3-fp8"};
    std::vector<std::string> settings;  // --set KEY=VALUE, for every recipe
    int k_sink = 1, threads = 0;
    std::uint64_t leak_tokens = ReportOptions{}.leak_tokens, rows = 0, seed = 0;
    double headroom_within = ReportOptions{}.headroom_emulate_within;
    bool json = false, list_tasks = false, no_cache = false, no_html = false, attribute_stages = false,
         tensorboard_heads = false;
};

// --shard I/N: the tasks this run does are those whose index is I - 1 modulo N.
struct Shard {
    std::size_t index = 0, count = 1;
};

Shard parse_shard(const std::string& text) {
    unsigned long long i = 0, n = 0;
    char end = 0;
    if (std::sscanf(text.c_str(), "%llu/%llu%c", &i, &n, &end) != 2 || i < 1 || i > n || n > (1u << 20) ||
        text.find_first_not_of("0123456789/") != std::string::npos)
        throw Error("--shard: '" + text + "' is not I/N with 1 <= I <= N <= 1048576 (e.g. 3/8)");
    return {static_cast<std::size_t>(i - 1), static_cast<std::size_t>(n)};
}

// Is `name` a TensorBoard run folder's name: one path component, printable, as TensorBoard lists it?
bool is_run_name(const std::string& name) {
    const bool printable = std::all_of(name.begin(), name.end(), [](char c) { return c >= 0x20 && c != 0x7f; });
    return !name.empty() && name != "." && name != ".." && name.find_first_of("/\\") == std::string::npos && printable;
}

void check_run_name(const std::string& name) {
    if (!is_run_name(name))
        throw Error("--tensorboard-run: '" + name + "' is not a folder name (one path component, printable)");
}

// The run's name where --tensorboard-run gives none: the dumps' folder's name (else "report").
std::string default_run_name(const std::string& dir) {
    std::filesystem::path p = std::filesystem::absolute(dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    const std::string name = p.filename().string();
    return is_run_name(name) ? name : "report";
}

// Before any work: what the options cannot do together, and what an output needs.
void check_report_args(const ReportArgs& a) {
    const bool engine = a.list_tasks || !a.run_task_key.empty();
    if (!a.task_file.empty() && a.run_task_key.empty()) throw Error("--task-file: only with --run-task");
    if (!a.shard.empty() && engine) throw Error("--shard: not with --list-tasks or --run-task");
    if (!a.tensorboard.empty() && (engine || !a.shard.empty()))
        throw Error("--tensorboard: only where the report is gathered (not with --shard, --list-tasks, --run-task)");
    if (a.tensorboard.empty() && (!a.tensorboard_run.empty() || a.tensorboard_heads))
        throw Error(std::string(a.tensorboard_heads ? "--tensorboard-heads" : "--tensorboard-run") +
                    ": only with --tensorboard LOGDIR");
    if (!a.tensorboard_run.empty()) check_run_name(a.tensorboard_run);
    if (!a.tensorboard.empty()) {
        if (std::filesystem::exists(a.tensorboard) && !std::filesystem::is_directory(a.tensorboard))
            throw Error("--tensorboard: " + a.tensorboard + " is a file, not a folder for event files");
        // the folder (or the nearest one above it that exists, where it will be made) writable
        std::filesystem::path there = std::filesystem::absolute(a.tensorboard);
        while (!std::filesystem::exists(there) && there.has_parent_path() && there != there.parent_path())
            there = there.parent_path();
        std::string probe = (there / ".roundscope-probe-XXXXXX").string();  // a folder made there and removed
        if (::mkdtemp(probe.data()) == nullptr)
            throw Error("--tensorboard: " + a.tensorboard + ": cannot make a folder in " + there.string() + ": " +
                        std::strerror(errno));
        std::filesystem::remove(probe);
        check_python_module("--tensorboard", "tensorboard");
    }
    if (!a.no_html && !engine && a.shard.empty()) check_python_module("report.html (or --no-html)", "plotly");
}

// Progress on standard error: on a terminal one line redrawn in place with the rate and the time
// left; otherwise (a log, a batch job) a line every 10 seconds and one at the end.
class Progress {
public:
    Progress(std::size_t total, bool terminal)
        : total_(total), terminal_(terminal), start_(Clock::now()), last_(start_) {}
    void advance() {
        std::lock_guard<std::mutex> lock(mutex_);
        ++done_;
        if (total_ == 0) return;
        const auto now = Clock::now();
        if (!terminal_ && done_ < total_ && now - last_ < std::chrono::seconds(10)) return;
        last_ = now;
        const double seconds = std::chrono::duration<double>(now - start_).count();
        const double rate = seconds > 0 ? static_cast<double>(done_) / seconds : 0;
        const std::string left = rate > 0 ? duration(static_cast<double>(total_ - done_) / rate) : std::string("?");
        const std::string counts = fmt::format("{}/{} tasks, {:.2f} tasks/s, {} left", done_, total_, rate, left);
        if (terminal_) {
            const std::size_t width = 30, filled = width * done_ / total_;
            std::fprintf(stderr, "\r[%s%s] %s   ", std::string(filled, '#').c_str(),
                         std::string(width - filled, ' ').c_str(), counts.c_str());
            if (done_ == total_) std::fputc('\n', stderr);
        } else {
            std::fprintf(stderr, "report: %s\n", counts.c_str());
        }
        std::fflush(stderr);
    }

private:
    using Clock = std::chrono::steady_clock;
    static std::string duration(double s) {
        if (s < 60) return fmt::format("{:.0f} s", s);
        if (s < 3600) return fmt::format("{}m{:02}s", static_cast<int>(s / 60), static_cast<int>(s) % 60);
        return fmt::format("{}h{:02}m", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
    }
    std::size_t total_, done_ = 0;
    bool terminal_;
    Clock::time_point start_, last_;
    std::mutex mutex_;
};

void report(const ReportArgs& a) {
    ReportOptions options;
    for (const std::string& name : a.recipes) {
        emu::AttentionRecipe r = emu::find_recipe(name);
        for (const std::string& kv : a.settings) emu::apply_setting(r, kv);
        emu::validate(r);
        options.recipes.push_back(r);
    }
    options.k_sink = a.k_sink;
    options.leak_tokens = a.leak_tokens, options.headroom_emulate_within = a.headroom_within;
    options.rows = a.rows, options.seed = a.seed;
    options.attribute_stages = a.attribute_stages;
    if (std::filesystem::exists(a.out) && !std::filesystem::is_directory(a.out))
        throw Error("-o: " + a.out + " is a file, not a folder for the report");
    if (std::filesystem::weakly_canonical(a.out) == std::filesystem::weakly_canonical(a.dir))
        throw Error("-o: the report's folder cannot be " + a.dir + " itself (its dumps would be left out)");
    // What the report writes into OUT, checked before any work: a folder where a file goes, or
    // the other way round, would stop it after every task ran.
    for (const char* name : {"report.json", "report.html"}) {
        const std::filesystem::path p = std::filesystem::path(a.out) / name;
        if (std::filesystem::exists(p) && !std::filesystem::is_regular_file(p))
            throw Error("-o: " + p.string() + " is there and not a file; move it away");
    }
    if (const std::filesystem::path p = std::filesystem::path(a.out) / "cache";
        std::filesystem::exists(p) && !std::filesystem::is_directory(p))
        throw Error("-o: " + p.string() + " is there and not a folder; move it away");
    check_report_folder(a.out);  // layers/: a real folder of the report's own, or none
    check_report_args(a);
    const Shard shard = a.shard.empty() ? Shard{} : parse_shard(a.shard);
    // A task run for an engine reads its own file only (as --list-tasks names it), not the folder.
    const std::vector<DumpFile> files = a.task_file.empty()
                                            ? scan_dumps(a.dir, a.out, options.recipes)
                                            : std::vector<DumpFile>{scan_dump(a.task_file, a.dir, options.recipes)};
    check_dumps(files, options);
    const std::vector<ReportTask> tasks = report_tasks(files, options);

    if (a.list_tasks) {
        nlohmann::json list = nlohmann::json::array();
        for (const ReportTask& t : tasks)
            list.push_back({{"key", t.key}, {"file", files[t.file].path}, {"head", t.head}});
        print_json({{"dir", a.dir}, {"tasks", list}});
        return;
    }
    if (!a.run_task_key.empty()) {
        for (const ReportTask& t : tasks)
            if (t.key == a.run_task_key) return print_json(run_task(files[t.file], t, options, a.threads));
        throw Error("--run-task: no task " + a.run_task_key + " in " +
                    (a.task_file.empty() ? a.dir : a.task_file + " as it is now") + " (see --list-tasks)");
    }

    const auto start = std::chrono::steady_clock::now();
    const std::filesystem::path cache = std::filesystem::path(a.out) / "cache";
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
        if (c.state != CacheEntry::valid || a.no_cache) pending.push_back(i);
    }
    // Many tasks: one per thread, each single-threaded; few: one at a time on every thread.
    const int threads = resolve_threads(a.threads);
    const bool task_parallel = pending.size() >= static_cast<std::size_t>(threads);
    Progress progress(pending.size(), !a.json && isatty(STDERR_FILENO));
    parallel_for(pending.size(), 1, task_parallel ? threads : 1, [&](std::size_t begin, std::size_t end) {
        for (std::size_t p = begin; p < end; ++p) {
            const ReportTask& t = tasks[pending[p]];
            write_cache_entry(cache_entry_path(cache, t),
                              run_task(files[t.file], t, options, task_parallel ? 1 : threads));
            progress.advance();
        }
    });

    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::size_t cached_tasks = mine - pending.size();
    if (!a.shard.empty()) {
        if (a.json)
            print_json({{"shard", a.shard},
                        {"tasks", mine},
                        {"all_tasks", tasks.size()},
                        {"cached", cached_tasks},
                        {"recomputed", recomputed},
                        {"seconds", seconds}});
        else
            fmt::print(
                "report shard {}: {} of {} task(s) ({} cached) in {:.1f} s into {}; when every shard is done, "
                "`roundscope report` with the same folders gathers them\n",
                a.shard, mine, tasks.size(), cached_tasks, seconds, cache.string());
        return;
    }
    // An entry changed since it was checked or written (another run sharing OUT) is recomputed.
    const std::string json_path = write_report(a.dir, a.out, files, tasks, options, [&](const ReportTask& t) {
        const std::filesystem::path entry = cache_entry_path(cache, t);
        CacheEntry c = read_cache_entry(entry, t, files[t.file]);
        if (c.state == CacheEntry::valid) return std::move(c.result);
        nlohmann::json result = run_task(files[t.file], t, options, threads);
        write_cache_entry(entry, result);
        return result;
    });
    const std::string html_path = (std::filesystem::path(a.out) / "report.html").string();
    if (!a.no_html) {
        AtomicFile page(html_path);
        run_python_module("report.html", "_report_page", {json_path, page.temporary_path()});
        page.commit();
    }
    if (!a.tensorboard.empty()) {
        std::vector<std::string> args{json_path, a.tensorboard, "--run",
                                      a.tensorboard_run.empty() ? default_run_name(a.dir) : a.tensorboard_run};
        if (a.tensorboard_heads) args.push_back("--heads");
        run_python_module("--tensorboard", "_report_tensorboard", args);
    }
    const std::string wrote = a.no_html ? json_path : json_path + " and " + html_path;
    if (a.json)
        print_json({{"report", json_path},
                    {"html", a.no_html ? nlohmann::json() : nlohmann::json(html_path)},
                    {"tensorboard", a.tensorboard.empty() ? nlohmann::json() : nlohmann::json(a.tensorboard)},
                    {"files", files.size()},
                    {"tasks", tasks.size()},
                    {"cached", cached_tasks},
                    {"recomputed", recomputed},
                    {"seconds", seconds}});
    else
        fmt::print("report: {} file(s), {} task(s) ({} cached{}) in {:.1f} s; wrote {}{}\n", files.size(), tasks.size(),
                   cached_tasks, recomputed > 0 ? fmt::format(", {} bad cache entries recomputed", recomputed) : "",
                   seconds, wrote, a.tensorboard.empty() ? "" : "; TensorBoard: " + a.tensorboard);
}

}  // namespace

void add_report_command(CLI::App& app) {
    auto* cmd =
        app.add_subcommand("report", "Every analysis on every attention dump under DIR: report.json and report.html");
    auto a = std::make_shared<ReportArgs>();
    cmd->add_option("DIR", a->dir, "Folder of attention dumps (.safetensors, as python/roundscope/dump.py writes)")
        ->required();
    cmd->add_option("-o,--out", a->out, "Folder for report.json, report.html and the cache")->capture_default_str();
    cmd->add_option("--recipe", a->recipes, "Recipes to attribute and compare against (repeatable)")
        ->check(recipe_name())
        ->capture_default_str();
    cmd->add_option("--set", a->settings,
                    "KEY=VALUE: change one setting of every recipe given (repeatable; e.g. o_format=f32 to compare "
                    "a float32 model's dumps)")
        ->check(accepted_by(
            [](const std::string& key_value) {
                emu::AttentionRecipe r;
                emu::apply_setting(r, key_value);
            },
            "KEY=VALUE"));
    cmd->add_option("--k-sink", a->k_sink, "Sink tokens (the first keys) for P-collapse")
        ->check(integer_in(1, 1 << 20))
        ->capture_default_str();
    cmd->add_option("--leak-tokens", a->leak_tokens,
                    "Future leakage on the first this many tokens of each head (its cost grows as their cube)")
        ->check(integer_in(1, 1 << 20))
        ->capture_default_str();
    cmd->add_option("--headroom-within", a->headroom_within,
                    "Emulate a format's softmax overflow only where its smallest margin is below this many nats")
        ->check(finite_in(0, 1e6))
        ->capture_default_str();
    auto* rows =
        cmd->add_option(
               "--rows", a->rows,
               "Sample this many query rows of each head (default: every row; at least 32; the figures are over "
               "them, each with its "
               "sampling error); a head with no more rows runs whole")
            ->check(integer_in(32, std::int64_t{1} << 40));
    cmd->add_option("--seed", a->seed, "Seed of the row sample (--rows)")
        ->check(seed_value())
        ->capture_default_str()
        ->needs(rows);  // without a sample there is nothing it seeds: an error, not ignored
    cmd->add_flag("--attribute-stages", a->attribute_stages,
                  "Attribute each recipe's error stage by stage (default: with every stage low and every stage exact)");
    cmd->add_flag("--no-cache", a->no_cache, "Recompute every task (the cache is still written)");
    cmd->add_flag("--list-tasks", a->list_tasks, "Print the tasks (key, file, head) as JSON and stop");
    cmd->add_option("--run-task", a->run_task_key,
                    "Run one task and print its result as JSON (for a distributed engine)")
        ->check(non_empty());
    cmd->add_option("--task-file", a->task_file,
                    "With --run-task: the task's file, as --list-tasks names it (only it is read)")
        ->check(non_empty());
    cmd->add_option("--shard", a->shard,
                    "Run only the I-th of N equal shares of the tasks into OUT's cache (I/N, e.g. 3/8); a plain "
                    "run gathers them")
        ->check(non_empty());
    cmd->add_option("--tensorboard", a->tensorboard,
                    "Also write the figures as TensorBoard event files into the run folder LOGDIR/RUN (needs "
                    "tensorboard): per layer, METRIC/layerLL")
        ->check(non_empty());
    cmd->add_option("--tensorboard-run", a->tensorboard_run,
                    "The run's folder name under LOGDIR (default: the dumps' folder's name)")
        ->check(non_empty());
    cmd->add_flag("--tensorboard-heads", a->tensorboard_heads,
                  "Also each head's figures as its own scalar, METRIC/layerLL/head H (default: per layer, the mean "
                  "and a histogram of the heads)");
    cmd->add_flag("--no-html", a->no_html, "Write report.json alone (report.html needs a Python with plotly)");
    add_output_flags(cmd, a->json, a->threads);
    cmd->footer("Example: roundscope report dumps -o dumps-report --recipe fa2-bf16 --recipe fa3-fp8\n");
    cmd->callback([a] { report(*a); });
}

}  // namespace roundscope::cli
