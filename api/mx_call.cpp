#include "api/mx_call.hpp"

#include <bit>

#include "analysis/scale_rules.hpp"
#include "api/argument_checks.hpp"
#include "api/argument_error.hpp"
#include "api/json_numbers.hpp"
#include "emu/numbers/cast_options.hpp"

namespace roundscope::api {
namespace {

std::vector<const Tensor*> chosen(const TensorFile& f, const std::vector<std::string>& names) {
    std::vector<const Tensor*> out;
    for (const std::string& n : names) out.push_back(&f.get(n));
    if (names.empty())
        for (const Tensor& t : f.tensors)
            if (is_floating(t.dtype())) out.push_back(&t);
    return out;
}

TensorFile read(const MxRequest& request) {
    if (!request.source.has_file()) throw Error("mx: needs an input file");
    return naming_input(request.source, [&] { return request.source.read(); });
}

}  // namespace

emu::BlockSpec block_spec(const MxRequest& request) {
    emu::BlockSpec s;
    if (request.format.empty()) throw ArgumentError("format", "a block format is required");
    s.format = for_argument("format", [&] { return &emu::block_format_named(request.format); });
    if (request.block != 0) check_in("block", request.block, ranges::mx_block);
    check_in("axis", request.axis, ranges::axis);
    check_in("offset", request.offset, ranges::mx_offset);
    check_in("threads", request.threads, ranges::threads);
    s.block = request.block, s.axis = request.axis, s.offset = request.offset;
    s.rule = for_argument("scale_rule", [&] { return emu::parse_scale_rule(request.scale_rule, ""); });
    if (!request.rounding.empty())
        for_argument("rounding", [&] { emu::parse_rounding_mode(request.rounding, s.element_options); });
    s.element_options.seed = request.seed;
    if (request.single_level && !s.format->nvfp4)
        throw ArgumentError("single_level", "applies to nvfp4 (two-level scales), not to " + request.format);
    s.per_tensor_scale = !request.single_level;
    s.threads = request.threads;
    return s;
}

TensorAnswer mx_quantize(const MxRequest& request) {
    const emu::BlockSpec spec = block_spec(request);
    const TensorFile in = read(request);
    TensorAnswer a;
    nlohmann::json tensors = nlohmann::json::array();
    for (const Tensor* t : chosen(in, request.names)) {
        emu::BlockQuantized q = emu::block_quantize(*t, spec);
        std::uint64_t nan_blocks = 0;
        for (std::uint64_t b = 0; b < q.scales.size(); ++b)
            nan_blocks += !spec.format->nvfp4 && q.scales.bits_at(b) == 0xFF;
        tensors.push_back(
            {{"name", t->name()}, {"shape", t->shape()}, {"blocks", q.scales.size()}, {"nan_blocks", nan_blocks}});
        if (request.dequant) a.tensors.push_back(emu::block_dequantize(q, spec));
        if (q.per_tensor_scale) {
            Tensor s = Tensor::zeros(t->name() + ".per_tensor_scale", DType::f32, {});
            s.set_bits_at(0, std::bit_cast<std::uint32_t>(*q.per_tensor_scale));
            a.tensors.push_back(std::move(s));
        }
        a.tensors.push_back(std::move(q.elements));
        a.tensors.push_back(std::move(q.scales));
    }
    const std::string rule = spec.format->nvfp4 ? "nvfp4" : std::string(emu::scale_rule_name(spec.rule));
    const int block = spec.block > 0 ? spec.block : spec.format->default_block;
    a.metadata = in.metadata;
    a.metadata["roundscope.mx.format"] = request.format;
    a.metadata["roundscope.mx.block"] = std::to_string(block);
    a.metadata["roundscope.mx.axis"] = std::to_string(request.axis);
    a.metadata["roundscope.mx.offset"] = std::to_string(request.offset);
    a.metadata["roundscope.mx.scale_rule"] = rule;
    a.json = {{"format", request.format}, {"block", block},     {"axis", request.axis},
              {"offset", request.offset}, {"scale_rule", rule}, {"tensors", tensors}};
    return a;
}

nlohmann::json mx_compare_rules(const MxRequest& request) {
    const emu::BlockSpec spec = block_spec(request);
    if (spec.format->nvfp4) throw ArgumentError("compare_rules", "applies to MX formats; NVFP4 has one scale rule");
    const TensorFile in = read(request);
    nlohmann::json tensors = nlohmann::json::array();
    for (const Tensor* t : chosen(in, request.names)) {
        const analysis::ScaleRuleComparison c = analysis::compare_scale_rules(*t, spec);
        nlohmann::json rules = nlohmann::json::array();
        for (const analysis::ScaleRuleResult& r : c.rules)
            rules.push_back({{"rule", std::string(emu::scale_rule_name(r.rule))},
                             {"blocks_differing_from_floor", r.blocks_differing_from_floor},
                             {"scale_up", r.scale_up},
                             {"scale_down", r.scale_down},
                             {"saturated", r.saturated},
                             {"max_abs_error", json_number(r.max_abs_error)},
                             {"rms_error", json_number(r.rms_error)},
                             {"relative_rms_error", json_number(r.relative_rms_error)}});
        tensors.push_back({{"name", t->name()}, {"blocks", c.blocks}, {"rules", rules}});
    }
    return {{"format", request.format},
            {"block", spec.block > 0 ? spec.block : spec.format->default_block},
            {"tensors", tensors}};
}

}  // namespace roundscope::api
