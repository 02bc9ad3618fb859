#pragma once
// `roundscope report`'s units of work. A folder of attention dumps becomes a list of tasks: one
// per head of each file (every analysis on that head, and where the file holds a kernel's
// outputs, that head's share of `compare` against each recipe). A task's result is a JSON object that depends only on
// the file's bytes and the options, so it is cached under a key made of both, and can run anywhere (a thread here, or a
// worker of a distributed engine) and be gathered later.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emu/attention/recipe/attention_recipe.hpp"

namespace roundscope::api {

struct ReportOptions {
    std::vector<emu::AttentionRecipe> recipes;  // attribution and compare
    int k_sink = 1;                             // the first k_sink keys are the sink (P-collapse)
    std::uint64_t leak_tokens = 128;            // leakage on the first tokens of each file (4 MX blocks)
    bool share_truth = true;             // one truth for the analyses of a head (off: each its own; the same results)
    bool groups_from_sample = true;      // --rows: the groups' runs and truths rows of the sample's (off: run
                                         // afresh; the same results)
    double headroom_emulate_within = 8;  // nats: a format's softmax emulated only this near overflow
    bool attribute_stages = false;       // attribution stage by stage (off: all low, all exact and delta)
    // Row sampling: each head's analyses on `rows` of its query rows (0, or as many as it has:
    // all), drawn from `seed` (the same rows for the same head index in every file), with each
    // figure's sampling error from random groups; leakage runs on its first tokens as always.
    std::uint64_t rows = 0;
    std::uint64_t seed = 0;
};

/// One dump, read and validated.
struct DumpFile {
    std::string path;                                   // as found under the folder
    std::string relative;                               // to the folder
    std::optional<std::int64_t> layer, step;            // from the metadata
    std::int64_t micro_batch = 0;                       // of the step (gradient accumulation); metadata, else 0
    std::uint64_t heads = 0, n_q = 0, n_kv = 0, d = 0;  // heads: over the batch, flattened
    std::uint64_t batch = 1, heads_per_batch = 1;
    bool causal = false, has_o = false, has_do = false, has_x = false;
    std::string content_hash;  // 16 hex digits over the tensors and metadata read (content_hash)
};

/// The worst elements the report keeps of each compared output.
inline constexpr std::size_t report_compare_worst = 4;

struct ReportTask {
    std::size_t file = 0;    // index into the files
    std::uint64_t head = 0;  // over the batch, flattened
    std::string key;         // the cache key: content, options, version, head
};

/// The .safetensors files under `dir` (but not under `exclude`, the report's own folder, unless
/// `dir` itself is inside it), by path, each read and checked as attention inputs (finite q, k,
/// v, do; integer metadata layer and step) and its kernel outputs as each of `recipes` would
/// compare them (dtypes, shapes): an Error naming the file for the first that is not, before
/// any work.
std::vector<DumpFile> scan_dumps(const std::string& dir, const std::string& exclude,
                                 const std::vector<emu::AttentionRecipe>& recipes);

/// One dump at `path` (under `dir`), read and checked as scan_dumps checks each.
DumpFile scan_dump(const std::string& path, const std::string& dir, const std::vector<emu::AttentionRecipe>& recipes);

/// Errors, before any work, for what the options cannot run on: a K sink that leaves a file no
/// key to measure (as `pcollapse` refuses it), and two files with the same layer and step
/// (their results would be merged), naming both.
void check_dumps(const std::vector<DumpFile>& files, const ReportOptions& options);

/// Every task of `files` under `options`, in a fixed order: files by path, heads in order.
std::vector<ReportTask> report_tasks(const std::vector<DumpFile>& files, const ReportOptions& options);

/// Runs one task (its analyses on `threads` threads). The result names its task (the key),
/// file, layer, step and head. An Error if the file's content is no longer what the scan read
/// (rewritten during the run): a result is never stored under another content's key.
nlohmann::json run_task(const DumpFile& file, const ReportTask& task, const ReportOptions& options, int threads);

/// Whether `j` is a result of this very task: an object naming its key, file, layer, step and
/// head, with every part the task writes. A cache entry that is not is recomputed.
bool is_task_result(const nlohmann::json& j, const ReportTask& task, const DumpFile& file);

/// The options as JSON (what the cache key covers, and report.json records).
nlohmann::json options_json(const ReportOptions& options);

}  // namespace roundscope::api
