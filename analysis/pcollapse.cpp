#include "analysis/pcollapse.hpp"

#include <cmath>

#include "analysis/attention_run.hpp"
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
    // relative half-step of the E4M3 grid (3 fraction bits) is 2^-4; an inexact S adds its own rounding
    p.worst_relative_step = p.exact ? 0x1p-4 : 0x1p-4 + 0x1p-24;
    return p;
}

PCollapseResult pcollapse(const emu::AttentionInputs& in, const PCollapseOptions& o) {
    PCollapseResult result{expected_normal_maximum(o.k_sink), {}};
    const emu::AttentionShape shape = emu::attention_shape_of(in, o.causal, o.softmax_scale);
    const emu::AttentionOperands operands = emu::attention_operands(in, *o.recipe.input, false);
    // The truth of the inputs as the kernel holds them (rounded to its input format): the MSE
    // measures what the kernel's arithmetic adds, not the inputs' rounding.
    TruthOptions t;
    t.causal = o.causal, t.scale = shape.scale, t.threads = o.threads;
    const AttentionTruth truth = attention_truth(inputs_as_held(in, operands, *o.recipe.input), t);
    for (const emu::KvOrder order : o.orders) {
        for (const float s : o.scales) {
            emu::AttentionRecipe r = o.recipe;
            r.kv_order = order, r.p_scale = s;
            emu::ForwardOptions fo;
            fo.threads = o.threads;
            fo.uncounted_keys = static_cast<std::uint64_t>(o.k_sink);
            const emu::ForwardResult f = emu::flash_forward(r, shape, operands, fo);
            PCollapseRun run{};
            run.order = order, run.scale = s, run.saturated = f.counts.p_saturated;
            run.delta_c = ln_1024 + std::log(s) - result.delta_k;
            // every unmasked non-sink P is positive in exact arithmetic: the denominator counts them all
            std::uint64_t visible = 0;
            for (std::uint64_t i = 0; i < shape.n_q; ++i) {
                const std::uint64_t keys = emu::steps::visible_keys(i, shape.n_q, shape.n_kv, shape.causal);
                visible +=
                    keys > static_cast<std::uint64_t>(o.k_sink) ? keys - static_cast<std::uint64_t>(o.k_sink) : 0;
            }
            run.counted = visible * shape.heads;
            const std::uint64_t zero_before_cast = run.counted - f.counts.p_nonzero;  // P-bar already 0 in float32
            run.underflow_fraction = run.counted == 0 ? 0
                                                      : static_cast<double>(f.counts.p_underflow + zero_before_cast) /
                                                            static_cast<double>(run.counted);
            if (o.sink_strength) {
                const double shift = *o.sink_strength - ln_1024 - std::log(s);
                run.predicted_fraction = normal_cdf(shift + result.delta_k);
                run.predicted_fraction_averaged = expected_cdf_of_shifted_maximum(shift, o.k_sink);
            }
            const ErrorStats e = error_stats(decoded(f.o, *r.o_format), truth.o);
            run.mse = e.rms * e.rms;
            result.runs.push_back(run);
        }
    }
    return result;
}

}  // namespace roundscope::analysis
