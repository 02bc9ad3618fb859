// The truth shared by a head's analyses (analysis/truth_cache.hpp) is the truth a fresh
// computation gives, bit for bit; it is reused only for the same source, held operands, format,
// mask and scale (a backward truth serving a forward request); and P-collapse, the rounding
// bias and attribution give the same numbers with it as without. Attribution's exact O cast,
// read from the run before its cast, equals a run with a float32 O.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <memory>

#include "analysis/attention_run.hpp"
#include "analysis/attribute.hpp"
#include "analysis/pcollapse.hpp"
#include "analysis/rounding_bias.hpp"
#include "analysis/synthetic_attention.hpp"
#include "analysis/truth_cache.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/inputs/row_sample.hpp"

using namespace roundscope;
using namespace roundscope::analysis;

namespace {

emu::AttentionInputs sink_head(std::uint64_t seed) {
    SyntheticSpec spec;
    spec.scenario = Scenario::sink, spec.n = 160, spec.d = 32, spec.seed = seed;
    return synthetic_attention(spec);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::bit_cast<std::uint64_t>(a[i]) != std::bit_cast<std::uint64_t>(b[i])) return false;
    return true;
}

}  // namespace

TEST_CASE("The truth cache hands out the truth a fresh computation gives, and only for the same request",
          "[truth][cache]") {
    const emu::AttentionInputs in = sink_head(3), twin = sink_head(3);
    const emu::AttentionOperands bf16 = emu::attention_operands(in, emu::bf16, true),
                                 e4m3 = emu::attention_operands(in, emu::e4m3, true);
    TruthOptions backward, forward;
    backward.causal = forward.causal = true;
    backward.backward = true;
    TruthCache cache;
    const AttentionTruth& first = cache.truth(in, bf16, emu::bf16, backward);
    const AttentionTruth fresh = attention_truth(inputs_as_held(in, bf16, emu::bf16), backward);
    CHECK(same_bits(first.o, fresh.o));
    CHECK(same_bits(first.delta, fresh.delta));
    CHECK(same_bits(first.dq, fresh.dq));
    CHECK(same_bits(first.dk, fresh.dk));
    CHECK(same_bits(first.dv, fresh.dv));
    CHECK(&cache.truth(in, bf16, emu::bf16, forward) == &first);  // a backward truth serves a forward request
    CHECK(cache.reused() == 1);
    CHECK(&cache.truth(in, e4m3, emu::e4m3, backward) != &first);  // held in another format
    TruthOptions no_mask = backward;
    no_mask.causal = false;
    CHECK(&cache.truth(in, bf16, emu::bf16, no_mask) != &first);
    TruthOptions scaled = backward;
    scaled.scale = 0.25;
    CHECK(&cache.truth(in, bf16, emu::bf16, scaled) != &first);
    CHECK(&cache.truth(twin, bf16, emu::bf16, backward) != &first);  // another source: not assumed equal
    emu::AttentionOperands changed = bf16;
    changed.v[7] ^= 1;
    CHECK(&cache.truth(in, changed, emu::bf16, backward) != &first);  // one bit of V differs
    CHECK(cache.computed() == 6);
    CHECK(cache.reused() == 1);
    const AttentionTruth& forward_first = TruthCache{}.truth(in, bf16, emu::bf16, forward);
    CHECK(forward_first.dq.empty());  // and a forward truth never serves a backward request:
    TruthCache c2;
    c2.truth(in, bf16, emu::bf16, forward);
    CHECK_FALSE(c2.truth(in, bf16, emu::bf16, backward).dq.empty());
    CHECK(c2.computed() == 2);
}

TEST_CASE("A truth of delta alone has delta's bits and no gradients, and serves no request for them",
          "[truth][cache]") {
    const emu::AttentionInputs in = sink_head(4);
    const emu::AttentionOperands bf16 = emu::attention_operands(in, emu::bf16, true);
    TruthOptions full, delta_only;
    full.causal = delta_only.causal = true;
    full.backward = delta_only.backward = true;
    delta_only.gradients = false;
    const AttentionTruth all = attention_truth(inputs_as_held(in, bf16, emu::bf16), full);
    const AttentionTruth delta = attention_truth(inputs_as_held(in, bf16, emu::bf16), delta_only);
    CHECK(same_bits(delta.delta, all.delta));
    CHECK(same_bits(delta.o, all.o));
    CHECK(same_bits(delta.lse, all.lse));
    CHECK((delta.dq.empty() && delta.dk.empty() && delta.dv.empty()));
    TruthCache cache;
    const AttentionTruth& first = cache.truth(in, bf16, emu::bf16, delta_only);
    CHECK(same_bits(first.delta, all.delta));
    CHECK(&cache.truth(in, bf16, emu::bf16, full) != &first);        // gradients asked: computed
    CHECK(&cache.truth(in, bf16, emu::bf16, delta_only) == &first);  // and delta alone is served
    CHECK(cache.computed() == 2);
    CHECK(cache.reused() == 1);
}

TEST_CASE("A truth of dQ without dK and dV serves no request for them, and a whole backward serves one without",
          "[truth][cache]") {
    const emu::AttentionInputs in = sink_head(6);
    const emu::AttentionOperands bf16 = emu::attention_operands(in, emu::bf16, true);
    TruthOptions full, rows_only;
    full.causal = rows_only.causal = true;
    full.backward = rows_only.backward = true;
    rows_only.key_gradients = false;
    TruthCache cache;
    const AttentionTruth& first = cache.truth(in, bf16, emu::bf16, rows_only);
    CHECK((first.dk.empty() && !first.dq.empty()));
    const AttentionTruth& second = cache.truth(in, bf16, emu::bf16, full);  // dK and dV asked: computed
    CHECK(&second != &first);
    CHECK(same_bits(second.dq, first.dq));
    CHECK(!second.dk.empty());
    TruthCache c2;
    const AttentionTruth& whole = c2.truth(in, bf16, emu::bf16, full);
    CHECK(&c2.truth(in, bf16, emu::bf16, rows_only) == &whole);
    CHECK((cache.computed() == 2 && c2.computed() == 1 && c2.reused() == 1));
    // a truth the caller vouches for is kept and served as computed ones are
    TruthCache c3;
    const AttentionTruth& kept = c3.put(in, bf16, emu::bf16, rows_only, query_head_of(whole, 0));
    CHECK(&c3.truth(in, bf16, emu::bf16, rows_only) == &kept);
    CHECK((c3.computed() == 0 && c3.reused() == 1));
    CHECK(same_bits(kept.dq, whole.dq));
}

TEST_CASE("A group's truth is taken row by row from its sample's, with the bits a fresh computation gives",
          "[truth][cache]") {
    const emu::AttentionInputs head = sink_head(5);
    const auto rows = std::make_shared<const std::vector<std::uint64_t>>(emu::sample_rows(head.n_q, 90, 2));
    std::vector<std::uint64_t> every_third;
    for (std::size_t i = 0; i < rows->size(); i += 3) every_third.push_back((*rows)[i]);
    const auto group = std::make_shared<const std::vector<std::uint64_t>>(every_third);
    const emu::AttentionInputs sample = emu::sampled_rows(head, rows), part = emu::sampled_rows(head, group);
    const emu::AttentionOperands sample_held = emu::attention_operands(sample, emu::bf16, true),
                                 part_held = emu::attention_operands(part, emu::bf16, true);
    TruthOptions delta_only, forward;
    delta_only.causal = forward.causal = true;
    delta_only.backward = true, delta_only.gradients = false;
    TruthCache sample_truths;
    sample_truths.truth(sample, sample_held, emu::bf16, delta_only);
    for (const TruthOptions* asked : {&delta_only, &forward}) {
        TruthCache group_truths(&sample_truths);
        const AttentionTruth& taken = group_truths.truth(part, part_held, emu::bf16, *asked);
        const AttentionTruth fresh = attention_truth(inputs_as_held(part, part_held, emu::bf16), *asked);
        CHECK((group_truths.sliced() == 1 && group_truths.computed() == 0));
        CHECK((taken.heads == 1 && taken.n_q == every_third.size()));
        CHECK(same_bits(taken.o, fresh.o));
        CHECK(same_bits(taken.lse, fresh.lse));
        CHECK(same_bits(taken.delta, fresh.delta));
        CHECK(taken.delta.size() == (asked->backward ? every_third.size() : 0));
    }
    // Computed afresh: a dO bit of the group that is not the sample's, another format, rows the
    // sample lacks (a sample has no dK or dV, so gradients are never asked of one).
    emu::AttentionOperands changed = part_held;
    changed.d_o[5] ^= 1;
    TruthCache g2(&sample_truths), g3(&sample_truths), g4(&sample_truths);
    const AttentionTruth& other_do = g2.truth(part, changed, emu::bf16, delta_only);
    CHECK(same_bits(other_do.delta, attention_truth(inputs_as_held(part, changed, emu::bf16), delta_only).delta));
    g3.truth(part, emu::attention_operands(part, emu::e4m3, true), emu::e4m3, delta_only);
    std::vector<std::uint64_t> beyond = every_third;
    std::uint64_t missing = 0;
    while (std::binary_search(rows->begin(), rows->end(), missing)) ++missing;
    beyond.insert(std::lower_bound(beyond.begin(), beyond.end(), missing), missing);
    const emu::AttentionInputs wider =
        emu::sampled_rows(head, std::make_shared<const std::vector<std::uint64_t>>(beyond));
    g4.truth(wider, emu::attention_operands(wider, emu::bf16, true), emu::bf16, delta_only);
    for (const TruthCache* g : {&g2, &g3, &g4}) CHECK((g->sliced() == 0 && g->computed() == 1));
}

TEST_CASE("P-collapse, the bias and attribution give the same numbers with the shared truth", "[truth][cache]") {
    const emu::AttentionInputs in = sink_head(5);
    TruthCache cache;
    AttributeOptions a;
    a.causal = true;
    for (const char* name : {"fa2-bf16", "fa3-fp8"}) {
        a.recipe = emu::find_recipe(name);
        a.truths = nullptr;
        const AttributeResult alone = attribute(in, a);
        a.truths = &cache;
        const AttributeResult shared = attribute(in, a);
        INFO(name);
        CHECK(shared.all_low == alone.all_low);
        CHECK(shared.all_exact == alone.all_exact);
        REQUIRE(shared.stages.size() == alone.stages.size());
        for (std::size_t s = 0; s < alone.stages.size(); ++s) {
            CHECK(shared.stages[s].only_this_low == alone.stages[s].only_this_low);
            CHECK(shared.stages[s].only_this_exact == alone.stages[s].only_this_exact);
        }
        CHECK(shared.delta_recipe == alone.delta_recipe);
        CHECK(shared.delta_from_f32_o == alone.delta_from_f32_o);
    }
    BiasOptions b;
    b.recipe = emu::find_recipe("fa2-bf16"), b.causal = true;
    const BiasResult bias_alone = rounding_bias(in, b);
    b.truths = &cache;
    const BiasResult bias_shared = rounding_bias(in, b);
    CHECK(bias_shared.coefficient_sum == bias_alone.coefficient_sum);
    CHECK(bias_shared.t_statistic == bias_alone.t_statistic);
    PCollapseOptions p;
    p.recipe = emu::find_recipe("fa3-fp8"), p.causal = true;
    const PCollapseResult collapse_alone = pcollapse(in, p);
    p.truths = &cache;
    const PCollapseResult collapse_shared = pcollapse(in, p);
    REQUIRE(collapse_shared.runs.size() == collapse_alone.runs.size());
    for (std::size_t r = 0; r < collapse_alone.runs.size(); ++r)
        CHECK(collapse_shared.runs[r].mse == collapse_alone.runs[r].mse);
    CHECK(cache.computed() == 2);  // held in BF16 and in E4M3, each with its backward pass
    CHECK(cache.reused() == 2);    // by the bias (BF16) and P-collapse (E4M3, forward)
}

TEST_CASE("Attribution's exact O cast equals a run whose O is float32", "[truth][cache][attribute]") {
    const emu::AttentionInputs in = sink_head(9);
    AttributeOptions a;
    a.recipe = emu::find_recipe("fa2-bf16"), a.causal = true;
    const emu::AttentionInputs in_without_do = [&] {
        emu::AttentionInputs x = in;
        x.d_o.reset();
        return x;
    }();
    const AttributeResult r = attribute(in_without_do, a);
    REQUIRE(r.stages.back().stage == "O cast");
    emu::AttentionRecipe f32_o = a.recipe;
    f32_o.output.format = &emu::f32;
    const emu::AttentionShape shape = emu::attention_shape_of(in, true, 0);
    const emu::AttentionOperands x = emu::attention_operands(in, emu::bf16, false);
    TruthOptions t;
    t.causal = true, t.scale = shape.scale;
    const AttentionTruth truth = attention_truth(inputs_as_held(in, x, emu::bf16), t);
    const emu::ForwardResult direct = emu::flash_forward(f32_o, shape, x, emu::ForwardOptions{});
    REQUIRE(r.stages.back().only_this_exact.has_value());
    CHECK(*r.stages.back().only_this_exact == error_stats(decoded(direct.o, emu::f32), truth.o).rel_rms);
}
