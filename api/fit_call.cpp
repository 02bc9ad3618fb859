#include "api/fit_call.hpp"

#include <deque>

#include "analysis/kernel_compare.hpp"
#include "api/argument_checks.hpp"
#include "api/argument_error.hpp"
#include "api/json_numbers.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "lib/memory_budget.hpp"

namespace roundscope::api {
namespace {

nlohmann::json candidate_json(const analysis::FitCandidate& c) {
    nlohmann::json settings = nlohmann::json::object(), outputs = nlohmann::json::object();
    for (const auto& [key, value] : c.settings) settings[key] = value;
    for (const analysis::OutputScore& o : c.outputs) outputs[o.name] = {{"matched", o.matched}, {"total", o.total}};
    return {
        {"preset", c.preset}, {"settings", settings}, {"outputs", outputs}, {"matched", c.matched}, {"total", c.total}};
}

nlohmann::json divergence_json(const std::optional<analysis::Divergence>& d) {
    if (!d) return nullptr;
    nlohmann::json explanations = nlohmann::json::array();
    for (const analysis::RowExplanation& e : d->explanations)
        explanations.push_back({{"stage", e.stage}, {"key", e.key}, {"value", e.value}, {"rows", e.rows}});
    return {
        {"rows", d->rows},
        {"rows_total", d->rows_total},
        {"steps",
         {{"statistics", d->steps.statistics}, {"after_statistics", d->steps.after}, {"unsplit", d->steps.unsplit}}},
        {"sampled", d->sampled},
        {"first",
         {{"file", d->file},
          {"output", d->output},
          {"index", d->index},
          {"kernel", json_number(d->kernel)},
          {"recipe", json_number(d->recipe)}}},
        {"explanations", explanations}};
}

void check_options(const FitRequest& request) {
    const analysis::FitOptions& o = request.options;
    auto integer = [](std::uint64_t x) { return static_cast<std::int64_t>(std::min<std::uint64_t>(x, INT64_MAX)); };
    check_in("threads", o.threads, ranges::threads);
    if (o.rows != 0) check_in("rows", integer(o.rows), ranges::fit_rows);
    check_in("beam", integer(o.beam), ranges::beam);
    check_in("max_evaluations", integer(o.max_evaluations), ranges::max_evaluations);
    check_in("max_seconds", o.max_seconds, ranges::max_seconds);
    check_in("top", integer(o.top), ranges::top);
    check_in("explain_rows", integer(o.explain_rows), ranges::explain_rows);
    for (const std::string& p : request.presets) for_argument("presets", [&] { emu::find_recipe(p); });
    for_argument("keys", [&] { analysis::check_fit_keys(request.keys); });
    if (request.dumps.empty()) throw ArgumentError("dumps", "fit needs at least one dump");
    validate(request.problem);
}

}  // namespace

Answer<analysis::FitResult> fit(const FitRequest& request) {
    check_options(request);
    analysis::FitOptions o = request.options;
    if (request.outputs)
        o.outputs = for_argument("outputs", [&] { return analysis::parse_output_names(*request.outputs, ""); });
    o.presets = request.presets, o.keys = request.keys;
    std::deque<TensorFile> files;  // the dumps point into it
    std::vector<analysis::FitDump> dumps;
    for (const FileSource& source : request.dumps) {
        const TensorFile& file = files.emplace_back(naming_input(source, [&] { return source.read(); }));
        const ChosenInputs c = naming_input(source, [&] { return file_inputs(file, request.problem); });
        check_memory(attention_bytes(c.in, c.in.d_o.has_value(), false, o.threads), source.name);
        dumps.push_back({&file, c.in, c.causal, c.softmax_scale});
    }
    analysis::FitResult r = analysis::fit_recipe(dumps, o);
    nlohmann::json names = nlohmann::json::array(), ranked = nlohmann::json::array();
    for (const FileSource& source : request.dumps) names.push_back(source.name);
    for (const analysis::FitCandidate& x : r.ranked) ranked.push_back(candidate_json(x));
    nlohmann::json j{{"files", names},
                     {"best", candidate_json(r.best)},
                     {"exact", r.best.matched == r.best.total},
                     {"candidates", ranked},
                     {"sampled", r.sampled},
                     {"evaluations", r.evaluations},
                     {"refused", r.refused},
                     {"rounds", r.rounds},
                     {"seconds", json_number(r.seconds)},
                     {"stopped", r.stopped},
                     {"divergence", divergence_json(r.divergence)}};
    return {std::move(r), std::move(j)};
}

}  // namespace roundscope::api
