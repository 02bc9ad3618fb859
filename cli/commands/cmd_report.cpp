// `roundscope report DIR [-o OUT] [--recipe NAME]... [--k-sink K] [--threads N] [--json]`: every
// analysis on every attention dump under DIR (api/report/report_tasks.hpp), files and heads in
// parallel, each task's result cached in OUT/cache by file content and options, gathered a layer
// at a time into OUT/layers/ and OUT/report.json (api/report/report_output.hpp), the page
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

#include "api/report/report_call.hpp"
#include "cli/analysis_flags.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/option_checks.hpp"
#include "cli/recipe_flags.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "lib/parallel.hpp"

namespace roundscope::cli {
namespace {

struct ReportArgs {
    std::string dir, out = "roundscope-report", run_task_key, task_file, shard, tensorboard, tensorboard_run, fitted;
    std::vector<std::string> recipes{"fa2-bf16", "fa3-fp8"};
    std::vector<std::string> settings;  // --set KEY=VALUE, for every recipe
    int k_sink = 1, threads = 0;
    std::uint64_t leak_tokens = api::ReportOptions{}.leak_tokens, rows = 0, seed = 0;
    double headroom_within = api::ReportOptions{}.headroom_emulate_within;
    bool json = false, list_tasks = false, no_cache = false, no_html = false, attribute_stages = false,
         tensorboard_heads = false, seed_given = false;
};

// Before any work: the flags that do not combine, in the command line's words (the library
// checks the same in its own).
void check_report_args(const ReportArgs& a) {
    const bool engine = a.list_tasks || !a.run_task_key.empty();
    if (!a.task_file.empty() && a.run_task_key.empty()) throw Error("--task-file: only with --run-task");
    if (!a.shard.empty() && engine) throw Error("--shard: not with --list-tasks or --run-task");
    if (!a.tensorboard.empty() && (engine || !a.shard.empty()))
        throw Error("--tensorboard: only where the report is gathered (not with --shard, --list-tasks, --run-task)");
    if (a.tensorboard.empty() && (!a.tensorboard_run.empty() || a.tensorboard_heads))
        throw Error(std::string(a.tensorboard_heads ? "--tensorboard-heads" : "--tensorboard-run") +
                    ": only with --tensorboard LOGDIR");
}

api::ReportRequest request_of(const ReportArgs& a) {
    api::ReportRequest r;
    r.dir = a.dir, r.out = a.out, r.recipes = a.recipes, r.settings = a.settings;
    if (!a.fitted.empty()) r.fitted = a.fitted;
    r.k_sink = a.k_sink, r.leak_tokens = a.leak_tokens, r.headroom_within = a.headroom_within;
    r.rows = a.rows;
    if (a.seed_given) r.seed = a.seed;
    r.attribute_stages = a.attribute_stages, r.no_cache = a.no_cache, r.html = !a.no_html;
    if (!a.shard.empty()) r.shard = a.shard;
    if (!a.tensorboard.empty()) r.tensorboard = a.tensorboard;
    if (!a.tensorboard_run.empty()) r.tensorboard_run = a.tensorboard_run;
    r.tensorboard_heads = a.tensorboard_heads, r.threads = a.threads;
    return r;
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
    check_report_args(a);
    const api::ReportRequest request = request_of(a);
    if (a.list_tasks) return print_json(api::report_task_list(request));
    if (!a.run_task_key.empty())
        return print_json(api::report_run_task(
            request, a.run_task_key, a.task_file.empty() ? std::nullopt : std::optional<std::string>(a.task_file)));
    std::unique_ptr<Progress> progress;
    const nlohmann::json j = api::report(
        request,
        {[&](std::size_t total) { progress = std::make_unique<Progress>(total, !a.json && isatty(STDERR_FILENO)); },
         [&] { progress->advance(); }});
    if (a.json) return print_json(j);
    if (!a.shard.empty()) {
        fmt::print(
            "report shard {}: {} of {} task(s) ({} cached) in {:.1f} s into {}; when every shard is done, "
            "`roundscope report` with the same folders gathers them\n",
            a.shard, j.at("tasks").get<std::size_t>(), j.at("all_tasks").get<std::size_t>(),
            j.at("cached").get<std::size_t>(), j.at("seconds").get<double>(), j.at("cache").get<std::string>());
        return;
    }
    const std::size_t recomputed = j.at("recomputed").get<std::size_t>();
    const std::string json_path = j.at("report").get<std::string>();
    const std::string wrote = a.no_html ? json_path : json_path + " and " + j.at("html").get<std::string>();
    fmt::print("report: {} file(s), {} task(s) ({} cached{}) in {:.1f} s; wrote {}{}\n",
               j.at("files").get<std::size_t>(), j.at("tasks").get<std::size_t>(), j.at("cached").get<std::size_t>(),
               recomputed > 0 ? fmt::format(", {} bad cache entries recomputed", recomputed) : "",
               j.at("seconds").get<double>(), wrote, a.tensorboard.empty() ? "" : "; TensorBoard: " + a.tensorboard);
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
    cmd->add_option("--fitted", a->fitted,
                    "FIT.json: also compare against the recipe `roundscope fit DUMP --json > FIT.json` found for "
                    "the kernel, named 'fitted' (--set leaves it as it is)");
    cmd->add_option("--k-sink", a->k_sink, "Sink tokens (the first keys) for P-collapse")
        ->check(integer_in(1, 1 << 20))
        ->capture_default_str();
    cmd->add_option("--leak-tokens", a->leak_tokens,
                    "Future leakage on the first this many tokens of each head (its cost grows as their cube)")
        ->check(integer_in(api::ranges::leak_tokens))
        ->capture_default_str();
    cmd->add_option("--headroom-within", a->headroom_within,
                    "Emulate a format's softmax overflow only where its smallest margin is below this many nats")
        ->check(finite_in(api::ranges::headroom_within))
        ->capture_default_str();
    auto* rows =
        cmd->add_option(
               "--rows", a->rows,
               "Sample this many query rows of each head (default: every row; at least 32; the figures are over "
               "them, each with its "
               "sampling error); a head with no more rows runs whole")
            ->check(integer_in(api::ranges::report_rows));
    auto* seed = cmd->add_option("--seed", a->seed, "Seed of the row sample (--rows)")
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
    cmd->callback([a, seed] {
        a->seed_given = seed->count() > 0;
        report(*a);
    });
}

}  // namespace roundscope::cli
