#include "analysis/scale_rules.hpp"

#include <cmath>
#include <string>

#include "emu/batch/tensor_decode.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/error.hpp"

namespace roundscope::analysis {

ScaleRuleComparison compare_scale_rules(const Tensor& t, const emu::BlockSpec& spec) {
    if (spec.format->nvfp4) throw Error("comparing scale rules applies to MX formats; NVFP4 has one scale rule");
    const std::vector<double> input = emu::decode_tensor<double>(t, spec.threads);
    double sum_squares = 0;
    for (double x : input)
        if (std::isfinite(x)) sum_squares += x * x;
    const double input_rms = std::sqrt(sum_squares / static_cast<double>(std::max<std::size_t>(1, input.size())));

    ScaleRuleComparison out;
    std::vector<std::uint64_t> floor_scales;
    const double element_max = emu::decode(*spec.format->element, emu::max_finite_bits(*spec.format->element));
    for (emu::ScaleRule rule : emu::all_scale_rules) {
        emu::BlockSpec s = spec;
        s.rule = rule;
        const emu::BlockQuantized q = emu::block_quantize(t, s);
        const std::vector<double> back = emu::decode_tensor<double>(emu::block_dequantize(q, s), spec.threads);
        ScaleRuleResult r{rule};
        out.blocks = q.scales.size();
        if (rule == emu::ScaleRule::floor)
            for (std::uint64_t b = 0; b < q.scales.size(); ++b) floor_scales.push_back(q.scales.bits_at(b));
        for (std::uint64_t b = 0; b < q.scales.size(); ++b) {
            const std::uint64_t scale = q.scales.bits_at(b);
            if (scale == floor_scales[b]) continue;
            ++r.blocks_differing_from_floor;
            (scale > floor_scales[b] ? r.scale_up : r.scale_down) += 1;
        }
        double error_squares = 0;
        for (std::size_t i = 0; i < input.size(); ++i) {
            if (!std::isfinite(input[i]) || !std::isfinite(back[i])) continue;
            const double e = std::fabs(back[i] - input[i]);
            r.max_abs_error = std::max(r.max_abs_error, e);
            error_squares += e * e;
            // Saturated: the element is at its max magnitude and the input lay beyond it.
            if (std::fabs(emu::decode(*spec.format->element, q.elements.bits_at(i))) == element_max &&
                std::fabs(input[i]) > std::fabs(back[i]))
                ++r.saturated;
        }
        r.rms_error = std::sqrt(error_squares / static_cast<double>(std::max<std::size_t>(1, input.size())));
        r.relative_rms_error = input_rms > 0 ? r.rms_error / input_rms : 0;
        out.rules.push_back(r);
    }
    return out;
}

}  // namespace roundscope::analysis
