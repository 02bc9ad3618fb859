// `roundscope report`'s cost a head: every task of the dumps under DIR (each head's analyses
// and its share of the file's compare) run on one thread, in CPU-seconds,
// with the report's defaults, and beside it the baseline: each analysis computing its own
// truth, leakage over 512 tokens and every format's softmax emulated (the defaults before the
// report shared its work). The same defaults with and without the shared truth give the same
// bits, which the run checks on the first head. With --rows K, also the defaults on a sample
// of K rows of each head with its sampling errors (`report --rows K`), and beside it the same
// with the sample's groups run afresh rather than taken from the sample's runs.
//
//   bench_report DIR [--heads K] [--rows K] [--simd TARGET]
#include <time.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "api/report/report_tasks.hpp"
#include "lib/error.hpp"
#include "tools/bench/simd_option.hpp"

using namespace roundscope;
using namespace roundscope::api;

namespace {

double cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Cost {
    double seconds = 0;  // CPU-seconds
    std::size_t heads = 0;
};

Cost cost(const std::vector<DumpFile>& files, const ReportOptions& options, std::size_t max_heads) {
    Cost c;
    for (const ReportTask& t : report_tasks(files, options)) {
        if (c.heads == max_heads) break;
        const double start = cpu_seconds();
        run_task(files[t.file], t, options, 1);
        c.seconds += cpu_seconds() - start;
        ++c.heads;
    }
    return c;
}

ReportOptions with_recipes(ReportOptions o) {
    for (const char* name : {"fa2-bf16", "fa3-fp8"}) o.recipes.push_back(emu::find_recipe(name));
    return o;
}

}  // namespace

int main(int argc, char** argv) try {
    bench::apply_simd_option(argc, argv);
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_report DIR [--heads K] [--rows K] [--simd TARGET]\n");
        return 2;
    }
    std::size_t max_heads = std::numeric_limits<std::size_t>::max();
    std::uint64_t rows = 0;
    for (int i = 2; i < argc; ++i) {
        if (std::strcmp(argv[i], "--heads") == 0 && i + 1 < argc) max_heads = std::stoull(argv[++i]);
        if (std::strcmp(argv[i], "--rows") == 0 && i + 1 < argc) rows = std::stoull(argv[++i]);
    }
    const ReportOptions report = with_recipes(ReportOptions{});
    const std::vector<DumpFile> files = scan_dumps(argv[1], "", report.recipes);
    ReportOptions baseline = report;
    baseline.share_truth = false, baseline.leak_tokens = 512, baseline.attribute_stages = true;
    baseline.headroom_emulate_within = std::numeric_limits<double>::infinity();
    ReportOptions unshared = report;
    unshared.share_truth = false;

    const std::vector<ReportTask> tasks = report_tasks(files, report);
    const bool same =
        run_task(files[tasks[0].file], tasks[0], report, 1) == run_task(files[tasks[0].file], tasks[0], unshared, 1);
    bool same_sampled = true;
    if (rows > 0) {
        ReportOptions sampled = report, afresh = report;
        sampled.rows = afresh.rows = rows;
        afresh.groups_from_sample = false;
        same_sampled =
            run_task(files[tasks[0].file], tasks[0], sampled, 1) == run_task(files[tasks[0].file], tasks[0], afresh, 1);
    }
    const Cost now = cost(files, report, max_heads), before = cost(files, baseline, max_heads);
    const auto heads = static_cast<double>(now.heads);
    std::printf("bench_report: %zu head(s) of %s, one thread, CPU-seconds a head\n", now.heads, argv[1]);
    std::printf("report defaults  %7.2f\n", now.seconds / heads);
    std::printf("baseline         %7.2f\n", before.seconds / heads);
    std::printf("speed-up         %7.1fx\n", before.seconds / now.seconds);
    if (rows > 0) {
        ReportOptions sampled = report;
        sampled.rows = rows;
        std::printf("sampled, %llu rows  %7.2f\n", static_cast<unsigned long long>(rows),
                    cost(files, sampled, max_heads).seconds / heads);
        ReportOptions afresh = sampled;
        afresh.groups_from_sample = false;
        std::printf("  groups run afresh %6.2f\n", cost(files, afresh, max_heads).seconds / heads);
    }
    std::printf("shared truth gives the same results as unshared (first head): %s\n", same ? "yes" : "NO");
    if (rows > 0)
        std::printf("groups from the sample give the same results as afresh (first head): %s\n",
                    same_sampled ? "yes" : "NO");
    return same && same_sampled ? 0 : 1;
} catch (const std::exception& e) {
    std::fprintf(stderr, "bench_report: error: %s\n", e.what());
    return 2;
}
