#include "analysis/pcollapse.hpp"

#include <algorithm>
#include <cmath>

#include "analysis/attention_run.hpp"
#include "analysis/collapse_model.hpp"
#include "analysis/truth/attention_truth.hpp"
#include "emu/attention/attention_operands.hpp"
#include "emu/attention/flash_attention.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/numbers/unpack.hpp"

namespace roundscope::analysis {
namespace {

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

constexpr double ln_1024 = 6.931471805599453;  // E4M3: P S <= 2^-10 rounds to zero

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

}  // namespace

double expected_normal_maximum(int k) {
    return over_normal_maximum(k, [](double x) { return x; });
}

double expected_cdf_of_shifted_maximum(double shift, int k) {
    return over_normal_maximum(k, [shift](double x) { return normal_cdf(shift + x); });
}

ScaleProperties scale_properties(float s) {
    ScaleProperties p{s, std::exp2(std::round(std::log2(s))) == s, 0, 0};
    // P in (0, 1]: P S lies in E4M3's normal range [2^-6, 448] for P in [2^-6 / S, min(1, 448 / S)]
    const double top = std::min(1.0, 448.0 / s), bottom = std::ldexp(1.0, -6) / s;
    p.normal_octaves = top > bottom ? std::log2(top / bottom) : 0;
    // dp(S): the spacing of the positive E4M3 values (codes in increasing order) around the
    // largest one below S, over S; above 448 the top binade's spacing.
    const auto top_code = static_cast<std::uint32_t>(emu::max_finite_bits(emu::e4m3));
    std::uint32_t below = 0;
    while (below + 1 <= top_code && emu::decode(emu::e4m3, below + 1) < s) ++below;
    const std::uint32_t upper = below < top_code ? below + 1 : below, lower = upper - 1;
    p.dp = (emu::decode(emu::e4m3, upper) - emu::decode(emu::e4m3, lower)) / static_cast<double>(s);
    return p;
}

namespace {

// Head h's slice of a [heads][rows][width] vector.
template <class T>
std::vector<T> head_slice(const std::vector<T>& x, std::uint64_t h, std::uint64_t per_head) {
    const auto begin = x.begin() + static_cast<std::ptrdiff_t>(h * per_head);
    return {begin, begin + static_cast<std::ptrdiff_t>(per_head)};
}

// The non-sink keys the rows of one head see: every one is a positive P in exact arithmetic.
std::uint64_t non_sink_keys(const emu::AttentionShape& shape, std::uint64_t k_sink) {
    std::uint64_t visible = 0;
    for (std::uint64_t i = 0; i < shape.n_q; ++i) {
        const std::uint64_t keys = emu::steps::visible_keys(i, shape.n_q, shape.n_kv, shape.causal);
        visible += keys > k_sink ? keys - k_sink : 0;
    }
    return visible;
}

}  // namespace

PCollapseResult pcollapse(const emu::AttentionInputs& in, const PCollapseOptions& o) {
    PCollapseResult result{expected_normal_maximum(o.k_sink), 0, 0, 0, {}, {}};
    const emu::AttentionShape shape = emu::attention_shape_of(in, o.causal, o.softmax_scale);
    const emu::Format& input = *o.recipe.input;
    const emu::AttentionOperands operands = emu::attention_operands(in, input, false);
    // The truth of the inputs as the kernel holds them (rounded to its input format): the MSE
    // measures what the kernel's arithmetic adds, not the inputs' rounding.
    TruthOptions t;
    t.causal = o.causal, t.scale = shape.scale, t.threads = o.threads;
    const AttentionTruth truth = attention_truth(inputs_as_held(in, operands, input), t);

    const auto k_sink = static_cast<std::uint64_t>(o.k_sink);
    const std::uint64_t counted = non_sink_keys(shape, k_sink);
    const std::uint64_t q_size = shape.n_q * shape.d, k_size = shape.n_kv * shape.d, v_size = shape.n_kv * shape.d_v,
                        o_size = shape.n_q * shape.d_v;
    const std::vector<double> q = decoded(operands.q, input), k = decoded(operands.k, input);
    CollapseModelOptions model{
        o.orders, o.scales, static_cast<std::uint64_t>(o.recipe.block_n), k_sink, shape.causal, shape.scale, o.threads};
    emu::AttentionShape one_head = shape;
    one_head.heads = 1;

    const std::size_t runs = o.orders.size() * o.scales.size();
    std::vector<std::vector<std::uint32_t>> outputs(runs, std::vector<std::uint32_t>(shape.heads * o_size));
    std::vector<std::uint64_t> underflow(runs, 0), saturated(runs, 0);
    std::vector<double> predicted(runs, 0), closed_form(runs, 0), averaged(runs, 0);
    bool every_head_has_a_sink = true;
    for (std::uint64_t h = 0; h < shape.heads; ++h) {
        const HeadCollapseModel m =
            collapse_model(head_slice(q, h, q_size), head_slice(k, h, k_size), shape.n_q, shape.n_kv, shape.d, model);
        every_head_has_a_sink = every_head_has_a_sink && m.rows > 0;
        PCollapseHead head{h, m.sink_strength, m.score_spread, m.sink_mass, {}};
        emu::AttentionOperands x;
        x.q = head_slice(operands.q, h, q_size), x.k = head_slice(operands.k, h, k_size);
        x.v = head_slice(operands.v, h, v_size);
        std::size_t r = 0;
        for (const emu::KvOrder order : o.orders) {
            for (const float s : o.scales) {
                emu::AttentionRecipe recipe = o.recipe;
                recipe.kv_order = order, recipe.p_scale = s;
                emu::ForwardOptions fo;
                fo.threads = o.threads, fo.uncounted_keys = k_sink;
                const emu::ForwardResult f = emu::flash_forward(recipe, one_head, x, fo);
                std::copy(f.o.begin(), f.o.end(), outputs[r].begin() + static_cast<std::ptrdiff_t>(h * o_size));
                // a P-bar already 0 in float32 counts as underflow too
                const std::uint64_t zero = f.counts.p_underflow + (counted - f.counts.p_nonzero);
                underflow[r] += zero, saturated[r] += f.counts.p_saturated, predicted[r] += m.predicted_underflow[r];
                if (m.rows > 0 && m.score_spread > 0) {
                    const double shift = (m.sink_strength - ln_1024 - std::log(s)) / m.score_spread;
                    closed_form[r] += static_cast<double>(counted) * normal_cdf(shift + result.delta_k);
                    averaged[r] += static_cast<double>(counted) * expected_cdf_of_shifted_maximum(shift, o.k_sink);
                }
                head.runs.push_back({counted == 0 ? 0 : static_cast<double>(zero) / static_cast<double>(counted),
                                     counted == 0 ? 0 : m.predicted_underflow[r] / static_cast<double>(counted),
                                     counted});
                ++r;
            }
        }
        result.sink_strength += m.sink_strength / static_cast<double>(shape.heads);
        result.score_spread += m.score_spread / static_cast<double>(shape.heads);
        result.sink_mass += m.sink_mass / static_cast<double>(shape.heads);
        result.heads.push_back(std::move(head));
    }

    const std::uint64_t total = counted * shape.heads;
    const auto fraction = [total](double x) { return total == 0 ? 0 : x / static_cast<double>(total); };
    std::size_t r = 0;
    for (const emu::KvOrder order : o.orders) {
        for (const float s : o.scales) {
            PCollapseRun run{};
            run.order = order, run.scale = s, run.saturated = saturated[r], run.counted = total;
            run.underflow_fraction = fraction(static_cast<double>(underflow[r]));
            run.predicted_fraction = fraction(predicted[r]);
            // the closed form assumes the sink tile comes first
            if (order == emu::KvOrder::forward && every_head_has_a_sink) {
                run.closed_form_fraction = fraction(closed_form[r]);
                run.predicted_fraction_averaged = fraction(averaged[r]);
            }
            run.delta_c = ln_1024 + std::log(s) - result.delta_k;
            const ErrorStats e = error_stats(decoded(outputs[r], *o.recipe.o_format), truth.o);
            run.mse = e.rms * e.rms;
            result.runs.push_back(run);
            ++r;
        }
    }
    // Reverse order's gain: the forward run's MSE at the same S over its own.
    for (PCollapseRun& reverse : result.runs) {
        if (reverse.order != emu::KvOrder::reverse || !(reverse.mse > 0)) continue;
        for (const PCollapseRun& forward : result.runs)
            if (forward.order == emu::KvOrder::forward && forward.scale == reverse.scale)
                reverse.mse_gain_over_forward = forward.mse / reverse.mse;
    }
    return result;
}

}  // namespace roundscope::analysis
