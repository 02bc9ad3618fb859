#include "api/report/report_tasks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "analysis/attribute.hpp"
#include "analysis/bias_steps.hpp"
#include "analysis/headroom.hpp"
#include "analysis/kernel_compare.hpp"
#include "analysis/leak.hpp"
#include "analysis/pcollapse.hpp"
#include "analysis/rounding_bias.hpp"
#include "analysis/sampling_error.hpp"
#include "analysis/truth_cache.hpp"
#include "api/analysis_json.hpp"
#include "api/file_source.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/flash_context.hpp"
#include "emu/attention/flash/run_cache.hpp"
#include "emu/attention/inputs/head_inputs.hpp"
#include "emu/attention/inputs/row_sample.hpp"
#include "emu/batch/format_dtype.hpp"
#include "emu/block/block_format.hpp"
#include "emu/numbers/format.hpp"
#include "lib/error.hpp"
#include "lib/splitmix.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::api {
namespace {

// FNV-1a, 64 bits: a content key, not a defence against a forged file.
struct Fnv {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    void add(std::span<const std::byte> bytes) {
        for (const std::byte b : bytes) h = (h ^ static_cast<std::uint64_t>(b)) * 0x100000001b3ULL;
    }
    void add(std::string_view s) {
        add(std::as_bytes(std::span(s.data(), s.size())));
        add(std::as_bytes(std::span("", 1)));  // a separator no name holds
    }
};

// Over what the analyses read: the metadata and every tensor's name, dtype, shape and bytes
// (not the file's bytes, read separately, which a rewrite between the two could make differ).
std::string content_hash(const TensorFile& file) {
    Fnv f;
    for (const auto& [key, value] : file.metadata) f.add(key), f.add(value);
    for (const Tensor& t : file.tensors) {
        f.add(t.name()), f.add(name(t.dtype()));
        for (const std::uint64_t n : t.shape()) f.add(std::to_string(n));
        f.add(t.bytes());
    }
    return fmt::format("{:016x}", f.h);
}

// A result's digest: FNV-1a over its JSON text without the digest (keys sorted, numbers in their
// shortest round-trip form, so a result read back gives the same text). It catches an entry
// edited or corrupted in the cache; it is not a defence against a forged one.
std::string result_digest(nlohmann::json j) {
    j.erase("digest");
    Fnv f;
    f.add(j.dump());
    return fmt::format("{:016x}", f.h);
}

std::optional<std::int64_t> metadata_integer(const TensorFile& file, const std::string& key) {
    const auto it = file.metadata.find(key);
    if (it == file.metadata.end()) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (errno == ERANGE)
        throw Error(fmt::format("{}: metadata \"{}\" is \"{}\", beyond a 64-bit integer", file.path, key, it->second));
    if (end == it->second.c_str() || *end != '\0')
        throw Error(fmt::format("{}: metadata \"{}\" is \"{}\", not an integer", file.path, key, it->second));
    return v;
}

bool under(const std::filesystem::path& p, const std::filesystem::path& folder) {
    if (folder.empty()) return false;
    const auto rel = std::filesystem::weakly_canonical(p).lexically_relative(std::filesystem::weakly_canonical(folder));
    return !rel.empty() && *rel.begin() != "..";
}

// Whether q, k, v (and dO) are held in one format, and which: their truth is then the truth of
// the inputs as that format holds them, the entry the recipes of that format share.
const emu::Format* one_format(const emu::AttentionInputs& in) {
    const DType d = in.q.dtype();
    if (in.k.dtype() != d || in.v.dtype() != d || (in.d_o && in.d_o->dtype() != d)) return nullptr;
    return &emu::format_of(d);
}

// The head's kernel outputs against each recipe (analysis::compare_kernel_head; over a sample
// of its rows, compare_kernel_rows), with the truth of its inputs as they are, gradients
// included where the file has the kernel's and the rows are all there: asked first, so that the
// analyses after find it (they ask for less).
nlohmann::json head_compare(const TensorFile& tensors, const emu::AttentionInputs& file_in,
                            const emu::AttentionInputs& in, std::uint64_t head, const ReportOptions& o,
                            analysis::TruthCache* truths, emu::RunCache* runs, int threads) {
    analysis::AttentionRunOptions r;
    r.causal = in.causal.value_or(false), r.scale = in.softmax_scale.value_or(0), r.threads = threads;
    r.runs = runs;
    const emu::Format* f = one_format(in);
    std::optional<analysis::AttentionTruth> group_truth;  // alive while the recipes are compared
    if (truths != nullptr && f != nullptr) {
        analysis::TruthOptions t;
        t.causal = r.causal, t.scale = static_cast<double>(emu::attention_shape_of(in, r.causal, r.scale).scale),
        t.threads = threads;
        t.backward = in.d_o.has_value();
        t.gradients = !in.query_rows && (tensors.find("dq") || tensors.find("dk") || tensors.find("dv"));
        // dK and dV of a grouped head sum over its group: compared from the group's own truth
        const std::uint64_t group = emu::kv_group(file_in);
        const bool key_outputs = tensors.find("dk") || tensors.find("dv");
        t.key_gradients = group == 1 && key_outputs;
        const emu::AttentionOperands held = emu::attention_operands(in, *f, t.backward);
        if (t.gradients && group > 1 && head % group == 0 && key_outputs) {
            // The group's first head compares the group's dK and dV: the group's truth, computed
            // once for every recipe, and this head's its first head's rows of it.
            analysis::TruthOptions g = t;
            g.key_gradients = true;
            group_truth = analysis::attention_truth(emu::group_inputs(file_in, head / group), g);
            r.known_group_truth = &*group_truth;
            r.known_truth = &truths->put(in, held, *f, t, analysis::query_head_of(*group_truth, 0));
        } else {
            r.known_truth = &truths->truth(in, held, *f, t);
        }
    }
    nlohmann::json compare;
    for (const emu::AttentionRecipe& recipe : o.recipes) {
        // a recipe that writes other dtypes than the kernel did cannot match it bit for bit: said, not compared
        if (const std::string why = analysis::output_format_mismatch(tensors, recipe); !why.empty()) {
            compare[recipe.name] = {{"skipped", why}};
            continue;
        }
        const analysis::CompareChoice choice{.worst_count = report_compare_worst};
        compare[recipe.name] = api::compare_part_json(
            in.query_rows ? analysis::compare_kernel_rows(tensors, file_in, head, in, recipe, r, choice)
                          : analysis::compare_kernel_head(tensors, file_in, head, recipe, r, choice));
    }
    return compare;
}

// Every analysis of one head's inputs `in` (the whole head, or a sample of its rows), but
// leakage, which looks at the head's first tokens whatever the sample. A group of a sample takes
// its rows' runs and truths from the sample's: `run_cache` holds the sample's runs
// (emu::RunCache::forward), `truth_cache` its truths (the group's are sliced from them).
nlohmann::json row_analyses(const TensorFile& tensors, const emu::AttentionInputs& file_in,
                            const emu::AttentionInputs& in, std::uint64_t head, const ReportOptions& o, int threads,
                            emu::RunCache& run_cache, analysis::TruthCache& truth_cache) {
    const bool causal = in.causal.value_or(false);
    const double scale = in.softmax_scale.value_or(0);
    nlohmann::json j;
    // One truth for each way the recipes hold the inputs, shared: attribution asks first with the
    // backward pass (when there is a dO), so the bias and P-collapse find theirs computed. The
    // score products S are shared the same way, by the runs over the same Q and K.
    analysis::TruthCache* truths = o.share_truth ? &truth_cache : nullptr;
    emu::RunCache* runs = o.share_truth ? &run_cache : nullptr;
    if (in.o) j["compare"] = head_compare(tensors, file_in, in, head, o, truths, runs, threads);
    nlohmann::json attribution;
    for (const emu::AttentionRecipe& r : o.recipes) {
        analysis::AttributeOptions a;
        a.recipe = r, a.causal = causal, a.softmax_scale = scale, a.threads = threads, a.truths = truths, a.runs = runs;
        a.stages = o.attribute_stages;
        attribution[r.name] = api::attribute_json(analysis::attribute(in, a));
    }
    j["attribute"] = attribution;

    analysis::PCollapseOptions p;
    p.recipe = emu::find_recipe("fa3-fp8");
    p.k_sink = o.k_sink, p.causal = causal, p.softmax_scale = scale, p.threads = threads, p.truths = truths,
    p.runs = runs;
    j["pcollapse"] = api::pcollapse_json(analysis::pcollapse(in, p), false);
    j["pcollapse"].erase("heads");  // one head: the same as the whole

    analysis::HeadroomOptions h;
    h.causal = causal, h.softmax_scale = scale, h.threads = threads, h.runs = runs;
    h.emulate_within = o.headroom_emulate_within;
    j["headroom"] = api::headroom_json(analysis::headroom(in, h), false);

    if (in.d_o) {
        analysis::BiasOptions b;
        b.recipe = emu::find_recipe("fa2-bf16");
        b.causal = causal, b.softmax_scale = scale, b.threads = threads, b.truths = truths, b.runs = runs;
        // the dump's own O (the kernel's), the recipe's emulated O, and the recipe with the fix
        analysis::BiasOptions emulated = b;
        emulated.use_stored_o = false;
        j["bias"] = {{"kernel", api::bias_json(analysis::rounding_bias(in, b))},
                     {"emulated", api::bias_json(analysis::rounding_bias(in, emulated))},
                     {"max_adjust", api::bias_json(analysis::rounding_bias(in, analysis::with_max_adjustment(b)))}};
    }
    return j;
}

// Head `head`'s rows are drawn from this seed: the same rows for that head index in every file.
std::uint64_t head_seed(std::uint64_t seed, std::uint64_t head) { return splitmix64(seed, head); }

// Every analysis of one head: on all its rows, or on a sample of o.rows of them with each
// figure's sampling error (analysis/sampling_error.hpp) from random groups of the sample, which
// are also kept for the file's compare (report_output.cpp merges them over the heads).
nlohmann::json head_analyses(const TensorFile& tensors, const emu::AttentionInputs& file_in, std::uint64_t head,
                             const ReportOptions& o, int threads) {
    const emu::AttentionInputs in = emu::head_inputs(file_in, head);
    nlohmann::json j;
    emu::RunCache runs;
    if (o.rows == 0 || o.rows >= in.n_q) {
        analysis::TruthCache truths;
        j = row_analyses(tensors, file_in, in, head, o, threads, runs, truths);
    } else {
        const std::size_t groups = std::clamp<std::size_t>(o.rows / 16, 2, analysis::sampling_groups);
        const emu::RowSample sample = emu::sample_row_groups(in.n_q, o.rows, head_seed(o.seed, head), groups);
        const emu::AttentionInputs sampled = emu::sampled_rows(in, sample.rows);  // alive with its truths
        analysis::TruthCache truths;
        j = row_analyses(tensors, file_in, sampled, head, o, threads, runs, truths);
        std::vector<nlohmann::json> results;
        nlohmann::json group_compare = nlohmann::json::array();
        for (const auto& rows : sample.groups) {
            // the groups' forward passes and truths are rows of the sample's
            emu::RunCache own_runs;
            analysis::TruthCache group_truths(o.groups_from_sample ? &truths : nullptr);
            results.push_back(row_analyses(tensors, file_in, emu::sampled_rows(in, rows), head, o, threads,
                                           o.groups_from_sample ? runs : own_runs, group_truths));
            if (results.back().contains("compare")) group_compare.push_back(results.back()["compare"]);
        }
        j["sampling_error"] = analysis::sampling_errors(j, results);
        j["sample"] = {{"rows", sample.rows->size()}, {"of", in.n_q}, {"groups", groups}, {"seed", o.seed}};
        if (!group_compare.empty()) j["sample"]["group_compare"] = group_compare;
    }
    if (in.causal.value_or(false)) {
        nlohmann::json leak;
        for (const emu::BlockFormat* f : {&emu::mxfp4, &emu::mxfp8_e4m3}) {
            analysis::LeakOptions l;
            l.format = f, l.softmax_scale = in.softmax_scale.value_or(0), l.max_tokens = o.leak_tokens,
            l.threads = threads;
            nlohmann::json r = api::leak_json(analysis::leak(in, l));
            r.erase("by_position");
            leak[f->name] = r;
        }
        j["leak"] = leak;
    }
    return j;
}

}  // namespace

DumpFile scan_dump(const std::string& path, const std::string& dir, const std::vector<emu::AttentionRecipe>& recipes) {
    const TensorFile file = read_tensor_file(path);
    const emu::AttentionInputs in = naming_file(path, [&] {
        emu::AttentionInputs x = emu::find_attention_inputs(file);
        emu::attention_operands(x, emu::f32, x.d_o.has_value());  // every input finite
        return x;
    });
    // The kernel's outputs the compare task will read: their shapes (a recipe that writes other
    // dtypes is not compared: the report says so); and every recipe takes the file's mask.
    if (in.o) naming_file(path, [&] { analysis::check_kernel_output_shapes(file, in); });
    for (const emu::AttentionRecipe& r : recipes)
        naming_file(path, [&] {
            emu::flash_context(r, emu::attention_shape_of(in, in.causal.value_or(false), in.softmax_scale.value_or(0)));
        });
    DumpFile f;
    f.path = path;
    f.relative = std::filesystem::path(path).lexically_relative(dir).string();
    f.layer = metadata_integer(file, "layer"), f.step = metadata_integer(file, "step");
    f.micro_batch = metadata_integer(file, "micro_batch").value_or(0);
    if (f.micro_batch < 0)
        throw Error(fmt::format("{}: metadata \"micro_batch\" is {}, not a count from 0", path, f.micro_batch));
    f.heads = emu::head_count(in), f.n_q = in.n_q, f.n_kv = in.n_kv, f.d = in.d;
    f.batch = in.batch, f.heads_per_batch = in.heads;
    f.causal = in.causal.value_or(false);
    f.has_o = in.o.has_value(), f.has_do = in.d_o.has_value(), f.has_x = in.x.has_value();
    if (in.n_kv <= 1)
        throw Error(path + ": P-collapse needs keys beyond the sink (Nk = " + std::to_string(in.n_kv) + ")");
    f.content_hash = content_hash(file);
    return f;
}

std::vector<DumpFile> scan_dumps(const std::string& dir, const std::string& exclude,
                                 const std::vector<emu::AttentionRecipe>& recipes) {
    std::error_code error;
    if (!std::filesystem::exists(dir, error)) throw FileError(dir + ": no such folder");
    if (!std::filesystem::is_directory(dir, error)) throw Error(dir + ": not a directory");
    // The report's folder is left out, unless the dumps are inside it (-o . over a subfolder).
    const std::string skipped = under(dir, exclude) || std::filesystem::equivalent(dir, exclude, error) ? "" : exclude;
    error.clear();
    std::vector<std::string> paths;
    std::string where = dir;  // the entry the walk stands on: an unreadable subfolder is named
    for (std::filesystem::recursive_directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
        where = it->path().string();
        if (it->is_directory(error) && under(it->path(), skipped)) {
            it.disable_recursion_pending();
            continue;
        }
        if (it->is_regular_file(error) && it->path().extension() == ".safetensors")
            paths.push_back(it->path().string());
    }
    if (error) throw FileError(where + ": " + error.message());
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) throw Error(dir + ": no .safetensors attention dumps");
    std::vector<DumpFile> files;
    for (const std::string& path : paths) files.push_back(scan_dump(path, dir, recipes));
    return files;
}

void check_dumps(const std::vector<DumpFile>& files, const ReportOptions& options) {
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, const DumpFile*> seen;
    for (const DumpFile& f : files) {
        if (static_cast<std::uint64_t>(options.k_sink) >= f.n_kv)
            throw Error(fmt::format("--k-sink: {} sink tokens leave none of {}'s Nk = {} keys to measure",
                                    options.k_sink, f.path, f.n_kv));
        if (!f.layer || !f.step) continue;
        const auto [it, fresh] = seen.emplace(std::tuple(*f.layer, *f.step, f.micro_batch), &f);
        if (!fresh)
            throw Error(fmt::format(
                "{} and {} are both layer {} at step {}{}: give each dump its own step or micro-batch (metadata "
                "\"step\", \"micro_batch\") or report them apart",
                it->second->path, f.path, *f.layer, *f.step,
                f.micro_batch ? fmt::format(", micro-batch {}", f.micro_batch) : std::string()));
    }
}

nlohmann::json options_json(const ReportOptions& o) {
    nlohmann::json recipes = nlohmann::json::array();
    for (const emu::AttentionRecipe& r : o.recipes)
        recipes.push_back({{"name", r.name}, {"settings", emu::recipe_settings(r)}});
    nlohmann::json j{{"recipes", recipes},
                     {"k_sink", o.k_sink},
                     {"leak_tokens", o.leak_tokens},
                     {"headroom_emulate_within", o.headroom_emulate_within},
                     {"attribute_stages", o.attribute_stages}};
    if (o.rows > 0) j["rows"] = o.rows, j["seed"] = o.seed;  // absent: every row (the keys of before)
    return j;
}

// What a task's result holds: raised whenever a task computes or stores anything differently,
// so that a cache written before is not taken for today's results.
constexpr int task_schema = 14;

std::vector<ReportTask> report_tasks(const std::vector<DumpFile>& files, const ReportOptions& options) {
    const std::string fingerprint =
        fmt::format("{} roundscope {} tasks {}", options_json(options).dump(), ROUNDSCOPE_VERSION, task_schema);
    Fnv fnv;
    fnv.add(std::as_bytes(std::span(fingerprint.data(), fingerprint.size())));  // no separator: the same keys
    const std::uint64_t h = fnv.h;
    std::vector<ReportTask> tasks;
    for (std::size_t i = 0; i < files.size(); ++i) {
        const std::string base = fmt::format("{}-{:016x}", files[i].content_hash, h);
        for (std::uint64_t head = 0; head < files[i].heads; ++head)
            tasks.push_back({i, head, fmt::format("{}-head{}", base, head)});
    }
    return tasks;
}

nlohmann::json run_task(const DumpFile& file, const ReportTask& task, const ReportOptions& options, int threads) {
    const TensorFile tensors = read_tensor_file(file.path);
    if (content_hash(tensors) != file.content_hash)
        throw Error(file.path + ": changed since the report read it (rewritten during the run?); run the report again");
    const emu::AttentionInputs in = emu::find_attention_inputs(tensors);
    nlohmann::json j{{"task", task.key},
                     {"file", file.relative},
                     {"layer", file.layer ? nlohmann::json(*file.layer) : nlohmann::json()},
                     {"step", file.step ? nlohmann::json(*file.step) : nlohmann::json()},
                     {"micro_batch", file.micro_batch}};
    j["head"] = task.head;
    j["kv_head"] = task.head / emu::kv_group(in);  // the key-value head it reads (flattened over the batch)
    j.update(naming_file(file.path, [&] { return head_analyses(tensors, in, task.head, options, threads); }));
    j["digest"] = result_digest(j);
    return j;
}

bool is_task_result(const nlohmann::json& j, const ReportTask& task, const DumpFile& file) {
    auto integer_or_null = [](const nlohmann::json& x, const std::optional<std::int64_t>& want) {
        return want ? x.is_number_integer() && x.get<std::int64_t>() == *want : x.is_null();
    };
    if (!j.is_object() || j.value("task", "") != task.key || j.value("file", "") != file.relative) return false;
    if (!j.contains("digest") || j["digest"] != result_digest(j)) return false;
    if (!j.contains("layer") || !integer_or_null(j["layer"], file.layer)) return false;
    if (!j.contains("step") || !integer_or_null(j["step"], file.step)) return false;
    if (!j.contains("micro_batch") || !integer_or_null(j["micro_batch"], file.micro_batch)) return false;
    if (!j.contains("head") || !j["head"].is_number_unsigned() || j["head"].get<std::uint64_t>() != task.head)
        return false;
    for (const char* part : {"attribute", "pcollapse", "headroom"})
        if (!j.contains(part) || !j[part].is_object()) return false;
    if (file.causal && (!j.contains("leak") || !j["leak"].is_object())) return false;
    if (file.has_do && (!j.contains("bias") || !j["bias"].is_object())) return false;
    if (file.has_o) {
        if (!j.contains("compare") || !j["compare"].is_object()) return false;
        try {
            for (const auto& [recipe, part] : j["compare"].items())
                if (!part.contains("skipped")) api::compare_part_from_json(part);
        } catch (const Error&) {
            return false;  // recomputed
        }
    }
    return true;
}

}  // namespace roundscope::api
