#pragma once
// How much the choice of MX scale rule matters for one tensor: libraries pick the shared
// exponent differently (floor in the OCP spec and torchao's default, rceil in cuBLAS and
// TransformerEngine, ceil and even elsewhere), so the same block can be stored one binade
// apart. For each rule: how many blocks get a scale other than the OCP rule's, how many
// elements saturate, and the error of quantize-then-dequantize against the input.
#include <cstdint>
#include <vector>

#include "emu/block/block_quantize.hpp"
#include "lib/tensor.hpp"

namespace roundscope::analysis {

struct ScaleRuleResult {
    emu::ScaleRule rule;
    std::uint64_t blocks_differing_from_floor = 0;  // scale bits other than the OCP rule's
    std::uint64_t scale_up = 0, scale_down = 0;     // of those, a larger / smaller scale
    std::uint64_t saturated = 0;                    // elements whose |V / X| exceeded the element max
    double max_abs_error = 0, rms_error = 0;        // of the dequantized values, over finite inputs
    double relative_rms_error = 0;                  // rms_error / rms(input)
};

struct ScaleRuleComparison {
    std::uint64_t blocks = 0;
    std::vector<ScaleRuleResult> rules;  // floor, ceil, even, rceil
};

/// spec.format must be an MX format (not NVFP4); spec.rule is ignored.
ScaleRuleComparison compare_scale_rules(const Tensor& t, const emu::BlockSpec& spec);

}  // namespace roundscope::analysis
