#include "cli/report/report_tasks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "analysis/attribute.hpp"
#include "analysis/bias_steps.hpp"
#include "analysis/headroom.hpp"
#include "analysis/kernel_compare.hpp"
#include "analysis/leak.hpp"
#include "analysis/pcollapse.hpp"
#include "analysis/rounding_bias.hpp"
#include "cli/analysis_flags.hpp"
#include "cli/analysis_json.hpp"
#include "cli/command_files.hpp"
#include "emu/attention/attention_operands.hpp"
#include "emu/attention/head_inputs.hpp"
#include "emu/block/block_format.hpp"
#include "emu/numbers/format.hpp"
#include "lib/error.hpp"
#include "lib/mapped_file.hpp"

namespace roundscope::cli {
namespace {

// FNV-1a, 64 bits: a content key, not a defence against a forged file.
std::string content_hash(const std::string& path) {
    const auto mapped = MappedFile::open(path);
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const std::byte b : mapped->bytes()) h = (h ^ static_cast<std::uint64_t>(b)) * 0x100000001b3ULL;
    return fmt::format("{:016x}", h);
}

std::optional<std::int64_t> metadata_integer(const TensorFile& file, const std::string& key) {
    const auto it = file.metadata.find(key);
    if (it == file.metadata.end()) return std::nullopt;
    char* end = nullptr;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (end == it->second.c_str() || *end != '\0')
        throw Error(fmt::format("{}: metadata \"{}\" is \"{}\", not an integer", file.path, key, it->second));
    return v;
}

bool under(const std::filesystem::path& p, const std::filesystem::path& folder) {
    if (folder.empty()) return false;
    const auto rel = std::filesystem::weakly_canonical(p).lexically_relative(std::filesystem::weakly_canonical(folder));
    return !rel.empty() && *rel.begin() != "..";
}

nlohmann::json head_analyses(const emu::AttentionInputs& in, const ReportOptions& o, int threads) {
    const bool causal = in.causal.value_or(false);
    const double scale = in.softmax_scale.value_or(0);
    nlohmann::json j;

    analysis::PCollapseOptions p;
    p.recipe = emu::find_recipe("fa3-fp8");
    p.k_sink = o.k_sink, p.causal = causal, p.softmax_scale = scale, p.threads = threads;
    j["pcollapse"] = pcollapse_json(analysis::pcollapse(in, p), false);
    j["pcollapse"].erase("heads");  // one head: the same as the whole

    if (causal) {
        nlohmann::json leak;
        for (const emu::BlockFormat* f : {&emu::mxfp4, &emu::mxfp8_e4m3}) {
            analysis::LeakOptions l;
            l.format = f, l.softmax_scale = scale, l.max_tokens = o.leak_tokens, l.threads = threads;
            nlohmann::json r = leak_json(analysis::leak(in, l));
            r.erase("by_position");
            leak[f->name] = r;
        }
        j["leak"] = leak;
    }

    analysis::HeadroomOptions h;
    h.causal = causal, h.softmax_scale = scale, h.threads = threads;
    j["headroom"] = headroom_json(analysis::headroom(in, h), false);

    if (in.d_o) {
        analysis::BiasOptions b;
        b.recipe = emu::find_recipe("fa2-bf16");
        b.causal = causal, b.softmax_scale = scale, b.threads = threads;
        // the dump's own O (the kernel's), the recipe's emulated O, and the recipe with the fix
        analysis::BiasOptions emulated = b;
        emulated.use_stored_o = false;
        j["bias"] = {{"kernel", bias_json(analysis::rounding_bias(in, b))},
                     {"emulated", bias_json(analysis::rounding_bias(in, emulated))},
                     {"max_adjust", bias_json(analysis::rounding_bias(in, analysis::with_max_adjustment(b)))}};
    }

    nlohmann::json attribution;
    for (const emu::AttentionRecipe& r : o.recipes) {
        analysis::AttributeOptions a;
        a.recipe = r, a.causal = causal, a.softmax_scale = scale, a.threads = threads;
        attribution[r.name] = attribute_json(analysis::attribute(in, a));
    }
    j["attribute"] = attribution;
    return j;
}

}  // namespace

std::vector<DumpFile> scan_dumps(const std::string& dir, const std::string& exclude) {
    std::error_code error;
    if (!std::filesystem::is_directory(dir, error)) throw Error(dir + ": not a directory");
    std::vector<std::string> paths;
    for (std::filesystem::recursive_directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
        if (it->is_directory(error) && under(it->path(), exclude)) {
            it.disable_recursion_pending();
            continue;
        }
        if (it->is_regular_file(error) && it->path().extension() == ".safetensors")
            paths.push_back(it->path().string());
    }
    if (error) throw FileError(dir + ": " + error.message());
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) throw Error(dir + ": no .safetensors attention dumps");
    std::vector<DumpFile> files;
    for (const std::string& path : paths) {
        const TensorFile file = read_input(path);
        const emu::AttentionInputs in = naming_input(path, [&] {
            emu::AttentionInputs x = emu::find_attention_inputs(file);
            emu::attention_operands(x, emu::f32, x.d_o.has_value());  // every input finite
            return x;
        });
        DumpFile f;
        f.path = path;
        f.relative = std::filesystem::path(path).lexically_relative(dir).string();
        f.layer = metadata_integer(file, "layer"), f.step = metadata_integer(file, "step");
        f.heads = emu::head_count(in), f.n_q = in.n_q, f.n_kv = in.n_kv, f.d = in.d;
        f.causal = in.causal.value_or(false);
        f.has_o = in.o.has_value(), f.has_do = in.d_o.has_value(), f.has_x = in.x.has_value();
        if (in.n_kv <= 1)
            throw Error(path + ": P-collapse needs keys beyond the sink (Nk = " + std::to_string(in.n_kv) + ")");
        f.content_hash = content_hash(path);
        files.push_back(std::move(f));
    }
    return files;
}

nlohmann::json options_json(const ReportOptions& o) {
    nlohmann::json recipes = nlohmann::json::array();
    for (const emu::AttentionRecipe& r : o.recipes)
        recipes.push_back({{"name", r.name}, {"settings", emu::recipe_settings(r)}});
    return {{"recipes", recipes}, {"k_sink", o.k_sink}, {"leak_tokens", o.leak_tokens}};
}

// What a task's result holds: raised whenever a task computes or stores anything differently,
// so that a cache written before is not taken for today's results.
constexpr int task_schema = 2;

std::vector<ReportTask> report_tasks(const std::vector<DumpFile>& files, const ReportOptions& options) {
    const std::string fingerprint =
        fmt::format("{} roundscope {} tasks {}", options_json(options).dump(), ROUNDSCOPE_VERSION, task_schema);
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const char c : fingerprint) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
    std::vector<ReportTask> tasks;
    for (std::size_t i = 0; i < files.size(); ++i) {
        const std::string base = fmt::format("{}-{:016x}", files[i].content_hash, h);
        for (std::uint64_t head = 0; head < files[i].heads; ++head)
            tasks.push_back({i, head, fmt::format("{}-head{}", base, head)});
        if (files[i].has_o) tasks.push_back({i, std::nullopt, base + "-compare"});
    }
    return tasks;
}

nlohmann::json run_task(const DumpFile& file, const ReportTask& task, const ReportOptions& options, int threads) {
    const TensorFile tensors = read_input(file.path);
    const emu::AttentionInputs in = emu::find_attention_inputs(tensors);
    nlohmann::json j{{"file", file.relative},
                     {"layer", file.layer ? nlohmann::json(*file.layer) : nlohmann::json()},
                     {"step", file.step ? nlohmann::json(*file.step) : nlohmann::json()}};
    if (task.head) {
        j["head"] = *task.head;
        j.update(
            naming_input(file.path, [&] { return head_analyses(emu::head_inputs(in, *task.head), options, threads); }));
        return j;
    }
    analysis::AttentionRunOptions r;
    r.causal = in.causal.value_or(false), r.scale = in.softmax_scale.value_or(0), r.threads = threads;
    nlohmann::json compare;
    for (const emu::AttentionRecipe& recipe : options.recipes) {
        nlohmann::json c =
            compare_json(naming_input(file.path, [&] { return analysis::compare_kernel(tensors, in, recipe, r, 4); }));
        compare[recipe.name] = c;
    }
    j["compare"] = compare;
    return j;
}

}  // namespace roundscope::cli
