#include "api/report/report_output.hpp"

#include "api/report/report_folder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "analysis/bias_steps.hpp"
#include "analysis/kernel_compare.hpp"
#include "analysis/sampling_error.hpp"
#include "api/analysis_json.hpp"
#include "api/json_numbers.hpp"
#include "api/report/report_cache.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"

namespace roundscope::api {
namespace {

// What the delta error over steps needs of a head's result.
struct BiasPoint {
    double kernel = 0, emulated = 0, max_adjust = 0;
};
using BiasSeries = std::map<std::pair<std::int64_t, std::int64_t>, std::map<std::int64_t, BiasPoint>>;

// `h`, a head of `file`'s results: its model head (the index within a batch element) gains the
// head's delta error at its step.
void add_bias_point(const nlohmann::json& h, const DumpFile& file, BiasSeries& series) {
    if (!h.contains("bias") || !h["layer"].is_number() || !h["step"].is_number()) return;
    const nlohmann::json& b = h["bias"];
    // A step's batch elements and micro-batches add up, as their gradients do: a head's weight
    // gradient sums over the batch, so the series is the model's head, not the dump's flat index.
    const auto head =
        static_cast<std::int64_t>(h["head"].get<std::uint64_t>() % std::max<std::uint64_t>(1, file.heads_per_batch));
    BiasPoint& p = series[{h["layer"].get<std::int64_t>(), head}][h["step"].get<std::int64_t>()];
    // A sampled head (--rows) sums its sampled rows: scaled to an estimate of the whole head's sum.
    double whole_head = 1;
    if (const auto sample = h.find("sample"); sample != h.end() && sample->is_object()) {
        const nlohmann::json rows = sample->value("rows", nlohmann::json()), of = sample->value("of", nlohmann::json());
        if (rows.is_number_unsigned() && of.is_number_unsigned() && rows.get<std::uint64_t>() > 0)
            whole_head = of.get<double>() / rows.get<double>();
    }
    // A kernel's NaN in O makes its coefficient "nan" (json_number): it stays NaN in the sums.
    const auto coefficient = [&](const char* part) {
        const nlohmann::json& x = b[part];
        return x.contains("coefficient_sum") ? whole_head * json_number_value(x["coefficient_sum"], "a head's bias")
                                             : 0.0;
    };
    p.kernel += coefficient("kernel");
    p.emulated += coefficient("emulated");
    p.max_adjust += coefficient("max_adjust");
}

// The delta error per layer and head over the steps, in step order, with its running sums and
// the exact sign test across steps (independent samples).
nlohmann::json bias_over_steps(const BiasSeries& series) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [key, steps] : series) {
        nlohmann::json s{{"layer", key.first}, {"head", key.second}};
        double sum = 0, emulated = 0, adjusted = 0;
        std::vector<double> per_step;
        for (const auto& [step, p] : steps) {
            sum += p.kernel, emulated += p.emulated, adjusted += p.max_adjust;
            per_step.push_back(p.kernel);
            s["steps"].push_back(step);
            s["coefficient_sum"].push_back(json_number(p.kernel));
            s["cumulative"].push_back(json_number(sum));
            s["emulated_cumulative"].push_back(json_number(emulated));
            s["max_adjust_cumulative"].push_back(json_number(adjusted));
        }
        const analysis::StepSigns signs = analysis::step_signs(per_step);
        s["positive_steps"] = signs.positive, s["negative_steps"] = signs.negative;
        s["sign_test_p"] = signs.p_value;
        out.push_back(s);
    }
    return out;
}

nlohmann::json file_entry(const DumpFile& f) {
    return {{"file", f.relative},
            {"layer", f.layer ? nlohmann::json(*f.layer) : nlohmann::json()},
            {"step", f.step ? nlohmann::json(*f.step) : nlohmann::json()},
            {"micro_batch", f.micro_batch},
            {"heads", f.heads},
            {"batch", f.batch},
            {"heads_per_batch", f.heads_per_batch},
            {"n_q", f.n_q},
            {"n_kv", f.n_kv},
            {"d", f.d},
            {"causal", f.causal},
            {"has_o", f.has_o},
            {"has_do", f.has_do},
            {"has_x", f.has_x},
            {"content_hash", f.content_hash}};
}

// A file's compare, gathered from its heads' parts (in head order) and merged: the layer file
// holds it once for the file, as `roundscope compare` gives it, and not the heads' parts. Over
// sampled rows, each random group is merged over the heads as well, for the file's sampling
// errors (analysis/sampling_error.hpp).
struct FileComparison {
    using Parts = std::map<std::string, std::vector<analysis::KernelComparison>>;  // by recipe
    std::optional<std::size_t> file;
    Parts parts;
    std::vector<Parts> groups;
    std::map<std::string, std::string> skipped;  // recipes not compared, and why

    void add_parts(Parts& to, const nlohmann::json& compare) {
        for (const auto& [recipe, part] : compare.items()) {
            if (part.contains("skipped"))
                skipped[recipe] = part["skipped"].get<std::string>();
            else
                to[recipe].push_back(api::compare_part_from_json(part));
        }
    }
    // One head's result: its compare and its groups' (taken out of the result), leaving the head
    // its own worst elements (the per-head view's) and bits matched, per recipe and output.
    void add(std::size_t f, nlohmann::json& r) {
        file = f;
        add_parts(parts, r["compare"]);
        nlohmann::json worst = nlohmann::json::object();
        for (const auto& [recipe, part] : r["compare"].items()) {
            if (part.contains("skipped")) continue;
            for (const auto& [name, o] : part["outputs"].items())
                worst[recipe][name] = {{"matched", o["matched"]}, {"total", o["total"]}, {"worst", o["worst"]}};
        }
        r["compare_worst"] = worst;
        r.erase("compare");
        if (r.contains("sampling_error")) r["sampling_error"].erase("compare");
        if (!r.contains("sample") || !r["sample"].contains("group_compare")) return;
        const nlohmann::json& g = r["sample"]["group_compare"];
        if (groups.empty()) groups.resize(g.size());
        if (g.size() != groups.size()) throw Error("report: the heads of one file were sampled in different groups");
        for (std::size_t i = 0; i < g.size(); ++i) add_parts(groups[i], g[i]);
        r["sample"].erase("group_compare");
    }
    static nlohmann::json merge(const Parts& parts, const emu::AttentionShape& shape) {
        nlohmann::json by_recipe = nlohmann::json::object();
        for (const auto& [recipe, heads] : parts)
            by_recipe[recipe] = api::compare_json(analysis::merge_heads(heads, shape, report_compare_worst));
        return by_recipe;
    }
    nlohmann::json merged(const std::vector<DumpFile>& files) {
        const DumpFile& f = files[*file];
        emu::AttentionShape shape;
        shape.heads = f.heads, shape.n_q = f.n_q, shape.n_kv = f.n_kv, shape.d = shape.d_v = f.d;
        nlohmann::json by_recipe = merge(parts, shape);
        for (const auto& [recipe, why] : skipped) by_recipe[recipe] = {{"skipped", why}};
        nlohmann::json out{{"file", f.relative},
                           {"layer", f.layer ? nlohmann::json(*f.layer) : nlohmann::json()},
                           {"step", f.step ? nlohmann::json(*f.step) : nlohmann::json()},
                           {"micro_batch", f.micro_batch},
                           {"compare", by_recipe}};
        if (!groups.empty()) {
            std::vector<nlohmann::json> merged_groups;
            for (const Parts& g : groups) merged_groups.push_back(merge(g, shape));
            out["sampling_error"] = analysis::sampling_errors(by_recipe, merged_groups);
        }
        for (const auto& [recipe, why] : skipped) out["compare"][recipe] = {{"skipped", why}};
        file.reset(), parts.clear(), groups.clear(), skipped.clear();
        return out;
    }
};

}  // namespace

std::string layer_file_name(const std::optional<std::int64_t>& layer) {
    return layer ? fmt::format("layers/layer{}.json", *layer) : std::string("layers/layer-none.json");
}

std::string write_report(const std::string& dir, const std::filesystem::path& out, const std::vector<DumpFile>& files,
                         const std::vector<ReportTask>& tasks, const ReportOptions& options,
                         const std::function<nlohmann::json(const ReportTask&)>& result_of) {
    std::map<std::optional<std::int64_t>, std::vector<const ReportTask*>> by_layer;  // each in the tasks' order
    for (const ReportTask& t : tasks) by_layer[files[t.file].layer].push_back(&t);
    // written into a folder of this run's, then put in place whole (report_folder.hpp)
    TemporaryFolder staging_folder = report_staging_folder(out);
    const std::filesystem::path staging = staging_folder.path();
    std::error_code ec;
    std::filesystem::create_directories(staging / "layers", ec);
    if (ec) throw FileError("create " + (staging / "layers").string() + ": " + ec.message());

    BiasSeries bias;
    nlohmann::json layers = nlohmann::json::array();
    std::vector<std::string> written;  // the layer files' names, for the folder's manifest
    for (const auto& [layer, layer_tasks] : by_layer) {
        nlohmann::json heads = nlohmann::json::array(), compare = nlohmann::json::array();
        FileComparison file_compare;
        for (const ReportTask* t : layer_tasks) {
            nlohmann::json r = result_of(*t);
            add_bias_point(r, files[t->file], bias);
            if (file_compare.file && *file_compare.file != t->file) compare.push_back(file_compare.merged(files));
            if (r.contains("compare")) file_compare.add(t->file, r);
            heads.push_back(std::move(r));
        }
        if (file_compare.file) compare.push_back(file_compare.merged(files));
        const std::string name = layer_file_name(layer);
        layers.push_back({{"layer", layer ? nlohmann::json(*layer) : nlohmann::json()},
                          {"file", name},
                          {"heads", heads.size()},
                          {"compare", compare.size()}});
        const nlohmann::json content{{"layer", layers.back()["layer"]}, {"heads", heads}, {"compare", compare}};
        write_text((staging / name).string(), content.dump(1));
        written.push_back(std::filesystem::path(name).filename().string());
    }
    write_layers_manifest(staging / "layers", written);

    nlohmann::json file_list = nlohmann::json::array();
    for (const DumpFile& f : files) file_list.push_back(file_entry(f));
    const nlohmann::json r{{"dir", dir},       {"options", options_json(options)},         {"files", file_list},
                           {"layers", layers}, {"bias_over_steps", bias_over_steps(bias)}, {"tasks", tasks.size()}};
    write_text((staging / "report.json").string(), r.dump(1));
    return install_report(out, staging_folder);
}

}  // namespace roundscope::api
