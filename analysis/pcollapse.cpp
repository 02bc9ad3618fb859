#include "analysis/pcollapse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analysis/attention_run.hpp"
#include "analysis/collapse_model.hpp"
#include "analysis/truth/attention_truth.hpp"
#include "analysis/truth_cache.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/inputs/head_inputs.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/numbers/format_info.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/error.hpp"

namespace roundscope::analysis {
namespace {

// The integral of f(x) k phi(x) Phi(x)^(k-1) over x (the density of the max of k standard
// normals), by the midpoint rule on [-10, 10].
template <class F>
double over_normal_maximum(int k, F f) {
    const int steps = 100000;
    const double h = 20.0 / steps;
    double sum = 0;
    for (int i = 0; i < steps; ++i) {
        const double x = -10 + (i + 0.5) * h;
        const double phi = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
        sum += f(x) * k * phi * std::pow(normal_cdf(x), k - 1) * h;
    }
    return sum;
}

// E[Phi(shift + M)] for M the max of k standard normals, by numerical integration.
double expected_cdf_of_shifted_maximum(double shift, int k) {
    return over_normal_maximum(k, [shift](double x) { return normal_cdf(shift + x); });
}

}  // namespace

double expected_normal_maximum(int k) {
    return over_normal_maximum(k, [](double x) { return x; });
}

ScaleProperties scale_properties(float s, const emu::Format& f) {
    const emu::FormatInfo info = emu::format_info(f);
    const auto sd = static_cast<double>(s);
    ScaleProperties p{s, std::exp2(std::round(std::log2(sd))) == sd, sd > info.max, 0, 0};
    // P in (0, 1]: P S lies in the format's normal range [min normal, max] (E4M3: [2^-6, 448])
    // for P in [min normal / S, 1] when S does not saturate
    const double bottom = info.min_normal / sd;
    p.normal_octaves = !p.saturates && bottom < 1 ? std::log2(1 / bottom) : 0;
    // dp(S): the spacing of the format's positive values (codes in increasing order) around the
    // largest one below S, over S; above the largest finite value the top binade's spacing.
    const auto top_code = static_cast<std::uint32_t>(emu::max_finite_bits(f));
    std::uint32_t below = 0;
    while (below + 1 <= top_code && emu::decode(f, below + 1) < sd) ++below;
    const std::uint32_t upper = below < top_code ? below + 1 : below, lower = upper - 1;
    p.dp = (emu::decode(f, upper) - emu::decode(f, lower)) / sd;
    return p;
}

namespace {

// Head h's slice of a [heads][rows][width] vector.
template <class T>
std::vector<T> head_slice(const std::vector<T>& x, std::uint64_t h, std::uint64_t per_head) {
    const auto begin = x.begin() + static_cast<std::ptrdiff_t>(h * per_head);
    return {begin, begin + static_cast<std::ptrdiff_t>(per_head)};
}

// The non-sink keys the rows of one head (a one-head shape) see: every one is a positive P in
// exact arithmetic.
std::uint64_t non_sink_keys(const emu::AttentionShape& shape, std::uint64_t k_sink) {
    std::uint64_t visible = 0;
    for (std::uint64_t i = 0; i < shape.n_q; ++i) {
        const std::uint64_t keys = emu::visible_keys(shape, i);
        if (!emu::has_key_bias(shape)) {
            visible += keys > k_sink ? keys - k_sink : 0;
            continue;
        }
        for (std::uint64_t j = k_sink; j < keys; ++j) visible += emu::key_visible(shape, 0, i, j) ? 1 : 0;
    }
    return visible;
}

// What one (order, S) run adds up over the heads.
struct RunTally {
    std::vector<std::uint32_t> o;  // every head's O, in the recipe's output format
    std::uint64_t underflow = 0, saturated = 0, underflow_without_sink = 0;
    double predicted = 0, empirical = 0, closed_form = 0, averaged = 0;  // underflowing P, summed over heads
};

// The inputs of a P-collapse measurement as the kernel holds them, and what every head shares.
struct Measurement {
    emu::AttentionShape shape;
    std::vector<emu::AttentionShape> one_head;  // each head's shape alone (its mask's view)
    emu::AttentionOperands operands;
    std::vector<double> q, k;            // decoded, [heads][rows][d]
    std::vector<std::uint64_t> counted;  // each head's non-sink P values
    std::uint64_t counted_total = 0;
    double threshold;  // underflow_log of the recipe's P format
};

// S, the factor P-bar is cast at: p_scale, or under a recipe that offsets its max (FlashAttention-3's
// FP8) the offset 2^k itself, its own way to scale P (S a power of two: pcollapse_scales_fit).
void scale_p(emu::AttentionRecipe& recipe, float s) {
    if (recipe.softmax.max_offset == 0) {
        recipe.p_and_v.p_scale = s;
        return;
    }
    recipe.softmax.max_offset = std::ilogb(s);
    recipe.p_and_v.p_scale = 1;
}

// Head h: the model's prediction, then each run's kernel, measured; adds to `tallies`.
// `has_sink`: the model found rows with a sink key and a spread of other scores.
PCollapseHead measure_head(const Measurement& m, std::uint64_t h, const PCollapseOptions& o, double delta_k,
                           std::vector<RunTally>& tallies, bool& has_sink) {
    const emu::AttentionShape& shape = m.shape;
    const std::uint64_t q_size = shape.n_q * shape.d, k_size = shape.n_kv * shape.d, v_size = shape.n_kv * shape.d_v,
                        o_size = shape.n_q * shape.d_v;
    const auto k_sink = static_cast<std::uint64_t>(o.k_sink);
    const emu::AttentionShape& one_head = m.one_head[h];
    const std::uint64_t counted = m.counted[h];
    CollapseModelOptions model{o.recipe.p_and_v.p_format,
                               o.orders,
                               o.scales,
                               static_cast<std::uint64_t>(emu::resolved_block_n(o.recipe, shape.d)),
                               k_sink,
                               static_cast<double>(shape.scale),
                               o.threads,
                               one_head};
    const HeadCollapseModel prediction =
        collapse_model(head_slice(m.q, h, q_size), head_slice(m.k, h, k_size), shape.n_q, shape.n_kv, shape.d, model);
    has_sink = prediction.rows > 0;
    PCollapseHead head{h, prediction.sink_strength, prediction.score_spread, prediction.sink_mass, {}, {}, {}, {}, {},
                       {}};
    head.score_gaps = prediction.score_gaps, head.p_binades = prediction.p_binades;
    head.sink_mass_sums = prediction.sink_mass_sums, head.position_rows = prediction.position_rows;
    head.problem_rows = prediction.problem_rows;
    head.collapsing_rows = prediction.collapsing_rows;
    for (CollapsingRow& row : head.collapsing_rows) row.head = h;
    emu::AttentionOperands x;
    x.q = head_slice(m.operands.q, h, q_size), x.k = head_slice(m.operands.k, h, k_size);
    x.v = head_slice(m.operands.v, h, v_size);
    // The counterfactual head: every sink key's features those of the first key after the sink.
    emu::AttentionOperands no_sink = x;
    if (o.without_sink && k_sink < shape.n_kv)
        for (std::uint64_t j = 0; j < k_sink; ++j)
            std::copy_n(x.k.begin() + static_cast<std::ptrdiff_t>(k_sink * shape.d), shape.d,
                        no_sink.k.begin() + static_cast<std::ptrdiff_t>(j * shape.d));
    std::size_t r = 0;
    for (const emu::KvOrder order : o.orders) {
        for (const float s : o.scales) {
            emu::AttentionRecipe recipe = o.recipe;
            recipe.tiles.kv_order = order;
            scale_p(recipe, s);
            emu::ForwardOptions fo;
            fo.threads = o.threads, fo.uncounted_keys = k_sink, fo.runs = o.runs;
            const emu::ForwardResult f = emu::flash_forward(recipe, one_head, x, fo);
            RunTally& t = tallies[r];
            std::copy(f.o.begin(), f.o.end(), t.o.begin() + static_cast<std::ptrdiff_t>(h * o_size));
            // a P-bar already 0 in float32 counts as underflow too
            const std::uint64_t zero = f.counts.p_underflow + (counted - f.counts.p_nonzero);
            t.underflow += zero, t.saturated += f.counts.p_saturated;
            t.predicted += prediction.predicted_underflow[r], t.empirical += prediction.counted_underflow[r];
            std::optional<double> closed_form;  // the closed form assumes the sink tile comes first
            if (prediction.rows > 0 && prediction.score_spread > 0) {
                const double shift = (prediction.sink_strength - m.threshold - std::log(static_cast<double>(s))) /
                                     prediction.score_spread;
                t.closed_form += static_cast<double>(counted) * normal_cdf(shift + delta_k);
                t.averaged += static_cast<double>(counted) * expected_cdf_of_shifted_maximum(shift, o.k_sink);
                if (order == emu::KvOrder::forward) closed_form = normal_cdf(shift + delta_k);
            }
            const auto share = [&](double part) { return counted == 0 ? 0 : part / static_cast<double>(counted); };
            head.runs.push_back({share(static_cast<double>(zero)), share(prediction.predicted_underflow[r]),
                                 share(prediction.counted_underflow[r]), counted, std::nullopt, closed_form});
            if (o.without_sink) {
                const emu::ForwardResult g = emu::flash_forward(recipe, one_head, no_sink, fo);
                const std::uint64_t g_zero = g.counts.p_underflow + (counted - g.counts.p_nonzero);
                t.underflow_without_sink += g_zero;
                head.runs.back().underflow_without_sink = share(static_cast<double>(g_zero));
            }
            ++r;
        }
    }
    return head;
}

// The runs over all heads: fractions of every head's non-sink P, and O's error against the truth.
std::vector<PCollapseRun> summarize_runs(const std::vector<RunTally>& tallies, const Measurement& m,
                                         const AttentionTruth& truth, bool every_head_has_a_sink, double delta_k,
                                         const PCollapseOptions& o) {
    const std::uint64_t total = m.counted_total;
    const auto fraction = [total](double x) { return total == 0 ? 0 : x / static_cast<double>(total); };
    std::vector<PCollapseRun> runs;
    std::size_t r = 0;
    for (const emu::KvOrder order : o.orders) {
        for (const float s : o.scales) {
            const RunTally& t = tallies[r++];
            PCollapseRun run{};
            run.order = order, run.scale = s, run.saturated = t.saturated, run.counted = total;
            run.underflow_fraction = fraction(static_cast<double>(t.underflow));
            if (o.without_sink) run.underflow_without_sink = fraction(static_cast<double>(t.underflow_without_sink));
            run.predicted_fraction = fraction(t.predicted);
            run.predicted_fraction_empirical = fraction(t.empirical);
            // the closed form assumes the sink tile comes first
            if (order == emu::KvOrder::forward && every_head_has_a_sink) {
                run.closed_form_fraction = fraction(t.closed_form);
                run.predicted_fraction_averaged = fraction(t.averaged);
            }
            run.delta_c = m.threshold + std::log(static_cast<double>(s)) - delta_k;
            const ErrorStats e = error_stats(decoded(t.o, *o.recipe.output.format), truth.o);
            run.mse = e.rms * e.rms;
            runs.push_back(run);
        }
    }
    // Reverse order's gain: the forward run's MSE at the same S over its own.
    for (PCollapseRun& reverse : runs) {
        if (reverse.order != emu::KvOrder::reverse || !(reverse.mse > 0)) continue;
        for (const PCollapseRun& forward : runs)
            if (forward.order == emu::KvOrder::forward && forward.scale == reverse.scale)
                reverse.mse_gain_over_forward = forward.mse / reverse.mse;
    }
    return runs;
}

}  // namespace

bool p_scale_reachable(const emu::AttentionRecipe& recipe, float s) {
    if (!(s > 0)) return false;
    if (recipe.softmax.max_offset == 0) return true;
    const int k = std::ilogb(s);
    return k >= 0 && k <= 30 && std::ldexp(1.0f, k) == s;
}

PCollapseResult pcollapse(const emu::AttentionInputs& given, const PCollapseOptions& o) {
    for (const float s : o.scales)
        if (!p_scale_reachable(o.recipe, s))
            throw Error(fmt::format("recipe '{}' scales P by its max offset: S = {} is not 2^k with k in [0, 30]",
                                    o.recipe.name, s));
    // k and v indexed by query head (the truth cache knows the inputs by their address: kept)
    const emu::AttentionInputs expanded =
        emu::kv_group(given) > 1 ? emu::kv_per_query_head(given) : emu::AttentionInputs{};
    const emu::AttentionInputs& in = emu::kv_group(given) > 1 ? expanded : given;
    PCollapseResult result{expected_normal_maximum(o.k_sink), 0, 0, 0, {}, {}, {}, {}, o.recipe.p_and_v.p_format};
    const emu::Format& input = *o.recipe.target.input;
    Measurement m;
    m.shape = emu::attention_shape_of(in, o.causal, o.softmax_scale);
    for (std::uint64_t h = 0; h < m.shape.heads; ++h) {
        m.one_head.push_back(emu::one_head_of(m.shape, h));
        m.counted.push_back(non_sink_keys(m.one_head.back(), static_cast<std::uint64_t>(o.k_sink)));
        m.counted_total += m.counted.back();
    }
    m.operands = emu::attention_operands(in, input, false);
    m.q = decoded(m.operands.q, input), m.k = decoded(m.operands.k, input);
    m.threshold = underflow_log(*o.recipe.p_and_v.p_format);
    // The truth of the inputs as the kernel holds them (rounded to its input format): the MSE
    // measures what the kernel's arithmetic adds, not the inputs' rounding.
    TruthOptions t;
    t.causal = o.causal, t.scale = static_cast<double>(m.shape.scale), t.threads = o.threads;
    const AttentionTruth truth = shared_truth(o.truths, in, m.operands, input, t);

    std::vector<RunTally> tallies(o.orders.size() * o.scales.size());
    for (RunTally& tally : tallies) tally.o.resize(m.shape.heads * m.shape.n_q * m.shape.d_v);
    bool every_head_has_a_sink = true;
    const auto heads = static_cast<double>(m.shape.heads);
    for (std::uint64_t h = 0; h < m.shape.heads; ++h) {
        bool has_sink = false;
        PCollapseHead head = measure_head(m, h, o, result.delta_k, tallies, has_sink);
        every_head_has_a_sink = every_head_has_a_sink && has_sink;
        result.sink_strength += head.sink_strength / heads;
        result.score_spread += head.score_spread / heads;
        result.sink_mass += head.sink_mass / heads;
        result.score_gaps.resize(head.score_gaps.size()), result.p_binades.resize(head.p_binades.size());
        for (std::size_t b = 0; b < head.score_gaps.size(); ++b)
            result.score_gaps[b] += head.score_gaps[b], result.p_binades[b] += head.p_binades[b];
        result.sink_mass_sums.resize(head.sink_mass_sums.size()),
            result.position_rows.resize(head.position_rows.size());
        result.problem_rows = head.problem_rows;
        for (std::size_t b = 0; b < head.sink_mass_sums.size(); ++b)
            result.sink_mass_sums[b] += head.sink_mass_sums[b], result.position_rows[b] += head.position_rows[b];
        result.collapsing_rows.insert(result.collapsing_rows.end(), head.collapsing_rows.begin(),
                                      head.collapsing_rows.end());
        std::sort(result.collapsing_rows.begin(), result.collapsing_rows.end(), collapses_more);
        if (result.collapsing_rows.size() > collapsing_row_count) result.collapsing_rows.resize(collapsing_row_count);
        result.heads.push_back(std::move(head));
    }
    result.runs = summarize_runs(tallies, m, truth, every_head_has_a_sink, result.delta_k, o);
    return result;
}

}  // namespace roundscope::analysis
