// Row sampling (emu/attention/inputs/row_sample.hpp) at the analyses: a sample's truth rows are the
// whole head's; sampling_errors' rules (analysis/sampling_error.hpp); and whether the errors are
// honest: over 40 seeds the estimates of a fraction (P-collapse's underflow) and of a total (the
// bias's delta-error sum, scaled up) fall within two standard errors of the whole head's value
// about as often as they should, and their mean squared z is near 1 (a standard error off by a
// factor of 2 either way fails).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "analysis/pcollapse.hpp"
#include "analysis/rounding_bias.hpp"
#include "analysis/sampling_error.hpp"
#include "analysis/synthetic_attention.hpp"
#include "analysis/truth/attention_truth.hpp"
#include "emu/attention/inputs/row_sample.hpp"
#include "lib/error.hpp"

using namespace roundscope;
using namespace roundscope::analysis;
using nlohmann::json;

namespace {

bool same(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

struct Coverage {
    int within = 0, draws = 0;
    double z2 = 0;
    void add(double estimate, double se, double truth) {
        const double z = (estimate - truth) / se;
        within += std::fabs(z) <= 2 ? 1 : 0, ++draws, z2 += z * z;
    }
};

}  // namespace

TEST_CASE("A sample's truth rows are the whole head's: O, LSE and delta, causal or not", "[row_sample][truth]") {
    SyntheticSpec spec;
    spec.scenario = Scenario::sink, spec.n = 200, spec.d = 32, spec.seed = 4;
    const emu::AttentionInputs in = synthetic_attention(spec);
    const emu::RowSample s = emu::sample_row_groups(200, 41, 9, 1);
    for (const bool causal : {false, true}) {
        TruthOptions t;
        t.causal = causal, t.backward = true, t.gradients = false;
        const AttentionTruth whole = attention_truth(in, t), part = attention_truth(emu::sampled_rows(in, s.rows), t);
        for (std::size_t r = 0; r < s.rows->size(); ++r) {
            const std::uint64_t i = (*s.rows)[r];
            CHECK(same(part.lse[r], whole.lse[i]));
            CHECK(same(part.delta[r], whole.delta[i]));
            for (std::uint64_t c = 0; c < in.d_v; ++c) CHECK(same(part.o[r * in.d_v + c], whole.o[i * in.d_v + c]));
        }
        t.gradients = true;
        CHECK_THROWS_WITH(attention_truth(emu::sampled_rows(in, s.rows), t), Catch::Contains("need every row"));
    }
}

TEST_CASE("sampling_errors: totals, averages and extremes by their groups, labelled lists item by item",
          "[row_sample]") {
    const std::vector<json> groups{{{"x", 1}, {"n", 2}, {"runs", {{{"order", "f"}, {"u", 1.0}}}}, {"top", {1, 2}}},
                                   {{"x", 2}, {"n", 2}, {"runs", {{{"order", "f"}, {"u", 2.0}}}}, {"top", {3, 4}}},
                                   {{"x", 3}, {"n", 2}, {"runs", {{{"order", "f"}, {"u", 3.0}}}}, {"top", {5, 6}}},
                                   {{"x", 4}, {"n", 2}, {"runs", {{{"order", "f"}, {"u", 4.0}}}}, {"top", {7, 8}}}};
    // Deviations from the mean 2.5: squares sum to 5.
    const json total = sampling_errors({{"x", 10}}, groups);
    CHECK(total["x"].get<double>() == Approx(std::sqrt(4.0 / 3.0 * 5)));
    const json mean = sampling_errors({{"x", 2.6}}, groups);
    CHECK(mean["x"].get<double>() == Approx(std::sqrt(5.0 / 12.0)));
    CHECK(sampling_errors({{"x", 4}}, groups)["x"].is_null());  // the largest group's: a maximum
    CHECK(sampling_errors({{"x", 1}}, groups)["x"].is_null());  // the smallest: a minimum
    CHECK(sampling_errors({{"n", 8}}, groups)["n"] == 0.0);     // the same in every group
    const json nested = sampling_errors({{"runs", {{{"order", "f"}, {"u", 2.5}}}}, {"top", {9, 9}}}, groups);
    CHECK(nested["runs"][0]["u"].get<double>() == Approx(std::sqrt(5.0 / 12.0)));
    CHECK_FALSE(nested.contains("top"));  // unlabelled items are not the same thing group to group
    std::vector<json> relabelled = groups;
    relabelled[2]["runs"][0]["order"] = "r";
    CHECK_FALSE(sampling_errors({{"runs", {{{"order", "f"}, {"u", 2.5}}}}}, relabelled).contains("runs"));
    CHECK_FALSE(sampling_errors({{"y", 1.0}}, groups).contains("y"));  // not in the groups
    CHECK_THROWS_AS(sampling_errors({{"x", 1}}, {groups[0]}), Error);
}

// [.][slow]: seconds of the full suite (ctest test_analysis_slow), not the fast loop.
TEST_CASE("Sampled estimates fall within two standard errors of the whole head's figure as often as they should",
          "[.][slow][row_sample]") {
    SyntheticSpec spec;
    spec.scenario = Scenario::sink, spec.n = 512, spec.d = 64, spec.seed = 21, spec.sink_strength = 9;
    const emu::AttentionInputs in = synthetic_attention(spec);
    PCollapseOptions p;
    p.recipe = emu::find_recipe("fa3-fp8");
    p.causal = true, p.orders = {emu::KvOrder::forward}, p.scales = {1}, p.threads = 2;
    BiasOptions b;
    b.recipe = emu::find_recipe("fa2-bf16");
    b.causal = true, b.threads = 2;
    const double whole_fraction = pcollapse(in, p).runs[0].underflow_fraction;
    const double whole_sum = rounding_bias(in, b).coefficient_sum;
    const std::uint64_t k = 128;
    const double scale_up = static_cast<double>(spec.n) / static_cast<double>(k);
    Coverage fraction, sum;
    for (std::uint64_t seed = 0; seed < 40; ++seed) {
        const emu::RowSample s = emu::sample_row_groups(spec.n, k, seed, sampling_groups);
        auto figures = [&](const std::shared_ptr<const std::vector<std::uint64_t>>& rows) {
            const emu::AttentionInputs x = emu::sampled_rows(in, rows);
            return json{{"fraction", pcollapse(x, p).runs[0].underflow_fraction},
                        {"sum", rounding_bias(x, b).coefficient_sum}};
        };
        const json whole = figures(s.rows);
        std::vector<json> groups;
        for (const auto& g : s.groups) groups.push_back(figures(g));
        const json se = sampling_errors(whole, groups);
        fraction.add(whole["fraction"].get<double>(), se["fraction"].get<double>(), whole_fraction);
        sum.add(whole["sum"].get<double>() * scale_up, se["sum"].get<double>() * scale_up, whole_sum);
    }
    for (const Coverage* c : {&fraction, &sum}) {
        INFO("within two standard errors " << c->within << " of " << c->draws << ", mean z^2 " << c->z2 / c->draws);
        CHECK(c->within >= 30);  // about 36 of 40 expected (t with 7 degrees of freedom, fewer rows than N)
        CHECK(c->z2 / c->draws > 0.35);
        CHECK(c->z2 / c->draws < 2.5);
    }
}
