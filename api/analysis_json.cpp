#include "api/analysis_json.hpp"

#include <limits>
#include <optional>

#include "api/json_numbers.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "lib/error.hpp"

namespace roundscope::api {
namespace {

// A head's (or the heads') sink mass by query position: the mean of each bin's measured rows
// (null where it has none), their count, and the first position of each bin.
void add_position_profile(nlohmann::json& j, const std::vector<double>& sums, const std::vector<std::uint64_t>& rows,
                          std::uint64_t problem_rows) {
    nlohmann::json means = nlohmann::json::array(), starts = nlohmann::json::array();
    for (std::size_t b = 0; b < sums.size(); ++b) {
        means.push_back(rows[b] > 0 ? json_number(sums[b] / static_cast<double>(rows[b])) : nlohmann::json());
        starts.push_back((b * problem_rows + sums.size() - 1) / sums.size());  // least p with p 16 / P >= b
    }
    j["sink_mass_by_position"] = means;
    j["rows_by_position"] = rows;
    j["position_bins"] = starts;
}

nlohmann::json collapsing_rows_json(const std::vector<analysis::CollapsingRow>& rows);

// What a head (PCollapseHead) and the heads together (PCollapseResult) both report: the sink,
// the profile, the sink by position and the rows that collapse most.
template <class Sink>
void add_sink_figures(nlohmann::json& j, const Sink& x) {
    j["effective_sink_strength"] = json_number(x.sink_strength);
    j["score_spread"] = json_number(x.score_spread);
    j["sink_mass"] = json_number(x.sink_mass);
    j["score_gap_histogram"] = x.score_gaps;
    j["p_binade_histogram"] = x.p_binades;
    j["collapsing_rows"] = collapsing_rows_json(x.collapsing_rows);
    add_position_profile(j, x.sink_mass_sums, x.position_rows, x.problem_rows);
}

nlohmann::json collapsing_rows_json(const std::vector<analysis::CollapsingRow>& rows) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows)
        out.push_back({{"head", r.head},
                       {"row", r.position},
                       {"keys", r.keys},
                       {"counted", r.counted},
                       {"sink_mass", json_number(r.sink_mass)}});
    return out;
}

nlohmann::json query_weight_json(const analysis::QueryWeightError& q) {
    nlohmann::json heads = nlohmann::json::array();
    for (const auto& h : q.per_head)
        heads.push_back({{"head", h.head},
                         {"rows", h.rows},
                         {"coefficient_sum", json_number(h.coefficient_sum)},
                         {"rank1_cosine_similarity", json_number(h.rank1_mean_cosine)},
                         {"error_structure_cosine", json_number(h.error_structure_cosine)},
                         {"dwq_error_norm", json_number(h.dwq_error_norm)},
                         {"dwq_norm", json_number(h.dwq_norm)},
                         {"dwq_error_relative", json_number(h.dwq_error_norm / h.dwq_norm)},
                         {"wq_norm", json_number(h.wq_norm)},
                         {"q_projection_residual", json_number(h.q_projection_residual)}});
    return {{"d_model", q.d_model},
            {"rank1_cosine_similarity", json_number(q.rank1_mean_cosine)},
            {"dwq_error_norm", json_number(q.dwq_error_norm)},
            {"dwq_norm", json_number(q.dwq_norm)},
            {"dwq_error_relative", json_number(q.dwq_error_norm / q.dwq_norm)},
            {"wq_norm", json_number(q.wq_norm)},
            {"heads", heads}};
}

}  // namespace
nlohmann::json pcollapse_json(const analysis::PCollapseResult& r, bool with_scale_properties) {
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& x : r.runs) {
        nlohmann::json j{{"order", emu::kv_order_name(x.order)},
                         {"scale", x.scale},
                         {"underflow_fraction", x.underflow_fraction},
                         {"underflow_without_sink", json_number(x.underflow_without_sink)},
                         {"predicted_fraction", json_number(x.predicted_fraction)},
                         {"predicted_fraction_empirical", json_number(x.predicted_fraction_empirical)},
                         {"closed_form_fraction", json_number(x.closed_form_fraction)},
                         {"predicted_fraction_averaged", json_number(x.predicted_fraction_averaged)},
                         {"delta_c", x.delta_c},
                         {"mse", json_number(x.mse)},
                         {"mse_gain_over_forward", json_number(x.mse_gain_over_forward)},
                         {"saturated", x.saturated},
                         {"counted", x.counted}};
        if (with_scale_properties) {
            const analysis::ScaleProperties p = analysis::scale_properties(x.scale, *r.p_format);
            j["exact_scaling"] = p.exact, j["saturates"] = p.saturates, j["normal_octaves"] = p.normal_octaves,
            j["dp"] = p.dp;
        }
        runs.push_back(j);
    }
    nlohmann::json heads = nlohmann::json::array();
    for (const auto& h : r.heads) {
        nlohmann::json head_runs = nlohmann::json::array();
        for (std::size_t i = 0; i < h.runs.size(); ++i)
            head_runs.push_back({{"order", emu::kv_order_name(r.runs[i].order)},
                                 {"scale", r.runs[i].scale},
                                 {"underflow_fraction", h.runs[i].underflow_fraction},
                                 {"underflow_without_sink", json_number(h.runs[i].underflow_without_sink)},
                                 {"predicted_fraction", json_number(h.runs[i].predicted_fraction)},
                                 {"predicted_fraction_empirical", json_number(h.runs[i].predicted_fraction_empirical)},
                                 {"closed_form_fraction", json_number(h.runs[i].closed_form_fraction)},
                                 {"counted", h.runs[i].counted}});
        heads.push_back({{"head", h.head}, {"runs", head_runs}});
        add_sink_figures(heads.back(), h);
    }
    nlohmann::json j{{"delta_k", r.delta_k}, {"runs", runs}, {"heads", heads}};
    add_sink_figures(j, r);
    if (!r.runs.empty())  // the run the collapsing rows are counted for
        j["collapsing_rows_run"] = {{"order", emu::kv_order_name(r.runs[0].order)}, {"scale", r.runs[0].scale}};
    return j;
}

nlohmann::json bias_json(const analysis::BiasResult& b) {
    nlohmann::json dims = nlohmann::json::array();
    for (const auto& d : b.top_dims)
        dims.push_back({{"dim", d.dim},
                        {"contribution", json_number(d.contribution)},
                        {"o_error_negative_fraction", d.o_error_negative_fraction},
                        {"v_negative_fraction", d.v_negative_fraction}});
    nlohmann::json j{{"recipe", b.recipe},
                     {"rows", b.rows},
                     {"coefficient_sum", json_number(b.coefficient_sum)},
                     {"positive_rows", b.positive_rows},
                     {"t_statistic", json_number(b.t_statistic)},
                     {"p_bar_one_count", b.p_bar_one_count},
                     {"repeated_max_rows", b.repeated_max_rows},
                     {"tied_rows", b.tied_rows},
                     {"tie_share_mean", json_number(b.tie_share_mean)},
                     {"tie_dominated_rows", b.tie_dominated_rows},
                     {"tie_dominance", emu::steps::tie_dominance},
                     {"one_key_rows", b.one_key_rows},
                     {"o_from_file", b.o_from_file},
                     {"top_dims", dims}};
    nlohmann::json head_ties = nlohmann::json::array();
    for (const analysis::HeadTies& t : b.head_ties)
        head_ties.push_back({{"tied_rows", t.tied_rows},
                             {"tie_share_mean", json_number(t.tie_share_mean)},
                             {"tie_dominated_rows", t.tie_dominated_rows},
                             {"one_key_rows", t.one_key_rows}});
    j["head_ties"] = head_ties;
    if (b.query_weight) j["query_weight"] = query_weight_json(*b.query_weight);
    return j;
}

nlohmann::json bias_steps_json(const analysis::BiasSteps& s) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& step : s.steps) {
        nlohmann::json j = bias_json(step.result);
        if (step.fixes)
            j["fixes"] = {{"max_adjust", bias_json(step.fixes->max_adjust)},
                          {"delta_from_f32_o", bias_json(step.fixes->delta_from_f32_o)}};
        steps.push_back(std::move(j));
    }
    nlohmann::json out = steps.empty() ? nlohmann::json::object() : steps.front();
    auto signs = [](const analysis::StepSigns& g) {
        return nlohmann::json{
            {"positive_steps", g.positive}, {"negative_steps", g.negative}, {"sign_test_p", json_number(g.p_value)}};
    };
    if (s.steps.size() > 1) {
        out["steps"] = steps;
        out["cumulative_coefficient"] = json_numbers(s.cumulative_coefficient);
        out.update(signs(s.signs));
        if (s.max_adjust_signs && s.delta_from_f32_o_signs)
            out["fix_signs"] = {{"max_adjust", signs(*s.max_adjust_signs)},
                                {"delta_from_f32_o", signs(*s.delta_from_f32_o_signs)}};
        if (!s.query_weight.empty()) {
            out["cumulative_dwq_error_norm"] = json_numbers(s.query_weight.cumulative_norm());
            out["structure_cosine_with_first_step"] = json_numbers(s.query_weight.structure_cosine_with_first());
            out["dwq_error_coherence"] = json_number(s.query_weight.coherence());
        }
    }
    return out;
}

nlohmann::json attribute_json(const analysis::AttributeResult& r) {
    nlohmann::json stages = nlohmann::json::array();
    for (const auto& s : r.stages)
        stages.push_back({{"stage", s.stage},
                          {"only_this_low", json_number(s.only_this_low)},
                          {"only_this_exact", json_number(s.only_this_exact)}});
    return {{"recipe", r.recipe},
            {"all_low", json_number(r.all_low)},
            {"all_exact", json_number(r.all_exact)},
            {"stages", stages},
            {"delta_recipe", json_number(r.delta_recipe)},
            {"delta_from_f32_o", json_number(r.delta_from_f32_o)}};
}

nlohmann::json leak_json(const analysis::LeakResult& r) {
    return {{"format", r.format},
            {"block", r.block},
            {"fix", r.fix},
            {"tokens", r.tokens},
            {"future_pairs", r.future_pairs},
            {"leaking_pairs", r.leaking_pairs},
            {"max_future_influence", json_number(r.max_future_influence)},
            {"leaking_pairs_natural", r.leaking_pairs_natural ? nlohmann::json(*r.leaking_pairs_natural) : nullptr},
            {"max_future_influence_natural", json_number(r.max_future_influence_natural)},
            {"parallel_vs_autoregressive_max_abs_diff", json_number(r.parallel_vs_autoregressive_max_abs_diff)},
            {"masked_contribution_violations", r.masked_contribution_violations},
            {"mixed_scale_blocks", r.mixed_scale_blocks},
            {"by_position",
             {{"future_influence", r.future_influence_by_position},
              {"parallel_vs_autoregressive", r.parallel_vs_autoregressive_by_position}}}};
}

nlohmann::json headroom_json(const analysis::HeadroomResult& r, bool with_rows) {
    nlohmann::json formats = nlohmann::json::array(), rows = nlohmann::json::array();
    for (const auto& f : r.formats)
        formats.push_back({{"format", f.format},
                           {"ln_max", f.ln_max},
                           {"naive_exp_overflow_rows", f.naive_exp_overflow_rows},
                           {"naive_sum_overflow_rows", f.naive_sum_overflow_rows},
                           {"shifted_overflow_rows", f.shifted_overflow_rows},
                           {"min_naive_margin", json_number(f.min_naive_margin)},
                           {"emulated_naive_nonfinite_rows", json_count(f.emulated_naive_nonfinite_rows)},
                           {"emulated_shifted_nonfinite_rows", json_count(f.emulated_shifted_nonfinite_rows)},
                           {"emulated_online_nonfinite_rows", json_count(f.emulated_online_nonfinite_rows)},
                           {"emulated_naive_zero_rows", json_count(f.emulated_naive_zero_rows)},
                           {"emulated_shifted_zero_rows", json_count(f.emulated_shifted_zero_rows)},
                           {"emulated_online_zero_rows", json_count(f.emulated_online_zero_rows)}});
    nlohmann::json j{{"rows_total", r.rows.size()}, {"formats", formats}};
    if (!r.note.empty()) j["note"] = r.note;
    if (with_rows) {
        for (const auto& x : r.rows)
            rows.push_back({{"head", x.head},
                            {"row", x.row},
                            {"max_score", json_number(x.max_score)},
                            {"lse", json_number(x.lse)}});
        j["rows"] = rows;
    }
    return j;
}

namespace {

nlohmann::json ulp_json(std::uint64_t u) { return u == ~std::uint64_t{0} ? nlohmann::json() : nlohmann::json(u); }

nlohmann::json difference_json(const std::optional<analysis::ElementDifference>& d) {
    if (!d) return nullptr;
    return {{"index", d->index},
            {"kernel", json_number(d->kernel)},
            {"recipe", json_number(d->emulated)},
            {"truth", json_number(d->truth)},
            {"ulp", ulp_json(d->ulp)}};
}

}  // namespace

nlohmann::json compare_json(const analysis::KernelComparison& r) {
    auto ulp = ulp_json;
    nlohmann::json outputs = nlohmann::json::object();
    for (const analysis::OutputComparison& x : r.outputs) {
        nlohmann::json histogram = nlohmann::json::array();  // in order of distance
        for (const auto& [label, count] : x.ulp_histogram.buckets)
            histogram.push_back({{"ulps", label}, {"count", count}});
        nlohmann::json worst = nlohmann::json::array();
        for (const analysis::WorstElement& w : x.worst)
            worst.push_back({{"index", w.index},
                             {"kernel", json_number(w.kernel)},
                             {"truth", json_number(w.truth)},
                             {"recipe", json_number(w.emulated)},
                             {"ulp", ulp(w.ulp)}});
        outputs[x.name] = {{"dtype", std::string(name(x.dtype))},
                           {"max_abs", json_number(x.truth_error.max_abs)},
                           {"rms", json_number(x.truth_error.rms)},
                           {"rel_rms", json_number(x.truth_error.rel_rms)},
                           {"ulp_histogram", histogram},
                           {"worst", worst},
                           {"matched", x.matched},
                           {"total", x.total},
                           {"max_ulp", ulp(x.max_ulp)},
                           {"max_row_ulp", json_number(x.max_row_ulp)},
                           {"sign_flips_near_zero", x.sign_flips_near_zero},
                           {"nonfinite", x.nonfinite},
                           {"first_nonfinite", difference_json(x.first_nonfinite)},
                           {"largest_difference", difference_json(x.largest_difference)}};
        if (x.outside_tolerance) outputs[x.name]["outside_tolerance"] = *x.outside_tolerance;
    }
    return {{"heads", r.shape.heads}, {"n_q", r.shape.n_q},   {"n_kv", r.shape.n_kv},
            {"outputs", outputs},     {"matched", r.matched}, {"total", r.total}};
}

nlohmann::json compare_part_json(const analysis::KernelComparison& r) {
    nlohmann::json j = compare_json(r);
    for (const analysis::OutputComparison& x : r.outputs) {
        nlohmann::json& o = j["outputs"][x.name];
        o["sums"] = {{"max_abs", json_number(x.sums.max_abs)},
                     {"squared", json_number(x.sums.squared)},
                     {"norm", json_number(x.sums.norm)},
                     {"finite", x.sums.finite}};
        o["ulp_buckets"] = x.bucket_counts;
    }
    return j;
}

namespace {

double number_of(const nlohmann::json& j) { return json_number_value(j, "a compare part"); }

std::uint64_t ulp_of(const nlohmann::json& j) { return j.is_null() ? ~std::uint64_t{0} : j.get<std::uint64_t>(); }

std::optional<analysis::ElementDifference> difference_of(const nlohmann::json& j) {
    if (j.is_null()) return std::nullopt;
    return analysis::ElementDifference{j.at("index").get<Shape>(), number_of(j.at("kernel")), number_of(j.at("recipe")),
                                       number_of(j.at("truth")), ulp_of(j.at("ulp"))};
}

}  // namespace

analysis::KernelComparison compare_part_from_json(const nlohmann::json& j) try {
    analysis::KernelComparison r;
    r.shape.heads = j.at("heads").get<std::uint64_t>();
    r.shape.n_q = j.at("n_q").get<std::uint64_t>(), r.shape.n_kv = j.at("n_kv").get<std::uint64_t>();
    r.matched = j.at("matched").get<std::uint64_t>(), r.total = j.at("total").get<std::uint64_t>();
    // compare_json writes the outputs as an object, in key order; the comparison lists them in
    // the kernel's order: o, lse, dq, dk, dv.
    for (const char* name : {"o", "lse", "dq", "dk", "dv"}) {
        if (!j.at("outputs").contains(name)) continue;
        const nlohmann::json& o = j["outputs"][name];
        analysis::OutputComparison c;
        c.name = name;
        c.dtype = parse_dtype(o.at("dtype").get<std::string>(), "a compare part's dtype");
        const nlohmann::json& s = o.at("sums");
        c.sums = {number_of(s.at("max_abs")), number_of(s.at("squared")), number_of(s.at("norm")),
                  s.at("finite").get<std::uint64_t>()};
        c.truth_error = analysis::error_stats_of(c.sums);
        c.bucket_counts = o.at("ulp_buckets").get<std::vector<std::uint64_t>>();
        if (c.bucket_counts.size() != analysis::ulp_buckets) throw Error("a compare part's ulp buckets are cut");
        for (const nlohmann::json& h : o.at("ulp_histogram"))
            c.ulp_histogram.buckets.emplace_back(h.at("ulps").get<std::string>(), h.at("count").get<std::uint64_t>());
        for (const nlohmann::json& w : o.at("worst"))
            c.worst.push_back({w.at("index").get<Shape>(), number_of(w.at("kernel")), number_of(w.at("truth")),
                               number_of(w.at("recipe")), ulp_of(w.at("ulp"))});
        c.matched = o.at("matched").get<std::uint64_t>(), c.total = o.at("total").get<std::uint64_t>();
        c.max_ulp = ulp_of(o.at("max_ulp"));
        c.max_row_ulp = number_of(o.at("max_row_ulp"));
        c.sign_flips_near_zero = o.at("sign_flips_near_zero").get<std::uint64_t>();
        c.nonfinite = o.at("nonfinite").get<std::uint64_t>();
        c.first_nonfinite = difference_of(o.at("first_nonfinite"));
        c.largest_difference = difference_of(o.at("largest_difference"));
        if (o.contains("outside_tolerance")) c.outside_tolerance = o["outside_tolerance"].get<std::uint64_t>();
        r.outputs.push_back(std::move(c));
    }
    if (r.outputs.size() != j["outputs"].size()) throw Error("a compare part holds an output it should not");
    return r;
} catch (const nlohmann::json::exception& e) {
    throw Error(std::string("a compare part is malformed: ") + e.what());
}

}  // namespace roundscope::api
