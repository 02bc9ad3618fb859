// `roundscope mx IN --format BLOCKFMT [--block K] [--axis A] [--offset O] [--scale-rule RULE]
//  [--round MODE] [-t NAME]... (-o OUT [--dequant] | --compare-rules) [--json]`:
// block quantization of the floating tensors of a file (docs/cli.md).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "analysis/scale_rules.hpp"
#include "cli/analysis_flags.hpp"
#include "cli/cast_flags.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/option_checks.hpp"
#include "emu/block/block_quantize.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::cli {
namespace {

struct MxArgs {
    std::string input, output, format, rule = "floor", round;
    std::vector<std::string> names;
    int block = 0, axis = -1, offset = 0, threads = 0;
    std::uint64_t seed = 0;
    bool dequant = false, compare = false, json = false, single_level = false;
};

emu::BlockSpec spec_of(const MxArgs& a) {
    emu::BlockSpec s;
    s.format = &emu::block_format_named(a.format);
    s.block = a.block;
    s.axis = a.axis;
    s.offset = a.offset;
    s.rule = emu::parse_scale_rule(a.rule, "--scale-rule");
    if (!a.round.empty()) emu::parse_rounding_mode(a.round, s.element_options);
    s.element_options.seed = a.seed;
    if (a.single_level && !s.format->nvfp4)
        throw Error("--single-level: applies to nvfp4 (two-level scales), not to " + a.format);
    if (a.compare && s.format->nvfp4) throw Error("--compare-rules: applies to MX formats; NVFP4 has one scale rule");
    s.per_tensor_scale = !a.single_level;
    s.threads = a.threads;
    return s;
}

std::vector<const Tensor*> chosen(const TensorFile& f, const std::vector<std::string>& names) {
    std::vector<const Tensor*> out;
    for (const std::string& n : names) out.push_back(&f.get(n));
    if (names.empty())
        for (const Tensor& t : f.tensors)
            if (is_floating(t.dtype())) out.push_back(&t);
    return out;
}

void compare_rules(const MxArgs& a, const emu::BlockSpec& spec, const TensorFile& in) {
    nlohmann::json tensors = nlohmann::json::array();
    std::vector<std::vector<std::string>> rows;
    for (const Tensor* t : chosen(in, a.names)) {
        const analysis::ScaleRuleComparison c = analysis::compare_scale_rules(*t, spec);
        nlohmann::json rules = nlohmann::json::array();
        for (const analysis::ScaleRuleResult& r : c.rules) {
            const std::string rule(emu::scale_rule_name(r.rule));
            rules.push_back({{"rule", rule},
                             {"blocks_differing_from_floor", r.blocks_differing_from_floor},
                             {"scale_up", r.scale_up},
                             {"scale_down", r.scale_down},
                             {"saturated", r.saturated},
                             {"max_abs_error", json_number(r.max_abs_error)},
                             {"rms_error", json_number(r.rms_error)},
                             {"relative_rms_error", json_number(r.relative_rms_error)}});
            rows.push_back({t->name(), rule, fmt::format("{} / {}", r.blocks_differing_from_floor, c.blocks),
                            std::to_string(r.scale_up), std::to_string(r.scale_down), std::to_string(r.saturated),
                            fmt::format("{:.4g}", r.max_abs_error), fmt::format("{:.4g}", r.rms_error),
                            fmt::format("{:.4g}", r.relative_rms_error)});
        }
        tensors.push_back({{"name", t->name()}, {"blocks", c.blocks}, {"rules", rules}});
    }
    if (a.json) {
        print_json(nlohmann::json{{"format", a.format},
                                  {"block", spec.block > 0 ? spec.block : spec.format->default_block},
                                  {"tensors", tensors}});
        return;
    }
    print_table({"tensor", "rule", "blocks != floor", "scale up", "scale down", "saturated", "max_abs_error",
                 "rms_error", "rel_rms_error"},
                rows);
}

void quantize(const MxArgs& a, const emu::BlockSpec& spec, const TensorFile& in) {
    if (a.output.empty()) throw Error("mx needs -o OUT (or --compare-rules)");
    std::vector<Tensor> out;
    nlohmann::json tensors = nlohmann::json::array();
    std::vector<std::vector<std::string>> rows;
    for (const Tensor* t : chosen(in, a.names)) {
        emu::BlockQuantized q = emu::block_quantize(*t, spec);
        std::uint64_t nan_blocks = 0;
        for (std::uint64_t b = 0; b < q.scales.size(); ++b)
            nan_blocks += !spec.format->nvfp4 && q.scales.bits_at(b) == 0xFF;
        tensors.push_back(
            {{"name", t->name()}, {"shape", t->shape()}, {"blocks", q.scales.size()}, {"nan_blocks", nan_blocks}});
        rows.push_back(
            {t->name(), shape_string(t->shape()), std::to_string(q.scales.size()), std::to_string(nan_blocks)});
        if (a.dequant) out.push_back(emu::block_dequantize(q, spec));
        if (q.per_tensor_scale) {
            Tensor s = Tensor::zeros(t->name() + ".per_tensor_scale", DType::f32, {});
            s.set_bits_at(0, std::bit_cast<std::uint32_t>(*q.per_tensor_scale));
            out.push_back(std::move(s));
        }
        out.push_back(std::move(q.elements));
        out.push_back(std::move(q.scales));
    }
    const std::string rule = spec.format->nvfp4 ? "nvfp4" : std::string(emu::scale_rule_name(spec.rule));
    const int block = spec.block > 0 ? spec.block : spec.format->default_block;
    std::map<std::string, std::string> metadata = in.metadata;
    metadata["roundscope.mx.format"] = a.format;
    metadata["roundscope.mx.block"] = std::to_string(block);
    metadata["roundscope.mx.axis"] = std::to_string(a.axis);
    metadata["roundscope.mx.offset"] = std::to_string(a.offset);
    metadata["roundscope.mx.scale_rule"] = rule;
    write_output(a.output, out, metadata);
    if (a.json) {
        print_json(nlohmann::json{{"format", a.format},
                                  {"block", block},
                                  {"axis", a.axis},
                                  {"offset", a.offset},
                                  {"scale_rule", rule},
                                  {"output", a.output},
                                  {"tensors", tensors}});
        return;
    }
    fmt::print("{} -> {} ({}, blocks of {} along axis {}, scale rule {})\n", a.input, a.output, a.format, block, a.axis,
               rule);
    print_table({"tensor", "shape", "blocks", "NaN blocks"}, rows);
}

}  // namespace

void add_mx_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("mx", "Quantize tensors into an OCP MX or NVFP4 block format");
    auto a = std::make_shared<MxArgs>();
    cmd->add_option("IN", a->input, "Tensor file (.safetensors or .npy), or FILE:NAME for one tensor")->required();
    cmd->add_option("--format", a->format, "mxfp8_e4m3 mxfp8_e5m2 mxfp6_e2m3 mxfp6_e3m2 mxfp4 mxint8 nvfp4")
        ->check(block_format_name())
        ->required();
    cmd->add_option("--block", a->block, "Elements per block (default 32; NVFP4 16)")->check(integer_in(1, 1 << 20));
    cmd->add_option("--axis", a->axis, "The blocked axis (-1: the last; -2: the token axis of [.., N, D])")
        ->check(integer_in(-64, 63))
        ->capture_default_str();
    cmd->add_option("--offset", a->offset, "Blocks start at positions j * block - offset")
        ->check(integer_in(0, 1 << 20))
        ->capture_default_str();
    cmd->add_option("--scale-rule", a->rule, "MX shared-exponent rule: floor (OCP) ceil even rceil")
        ->capture_default_str();
    cmd->add_option("--round", a->round, "Element rounding: rne rna rtz up down odd sr sr:N (default rne)")
        ->check(rounding_mode());
    cmd->add_option("--seed", a->seed, "Philox seed for stochastic rounding")
        ->check(seed_value())
        ->capture_default_str();
    cmd->add_option("-t,--tensor", a->names, "Only this tensor (repeatable; default: every floating tensor)");
    cmd->add_option("-o,--output", a->output, "Write <name>.elements, <name>.scales (and <name> with --dequant)");
    cmd->add_flag("--dequant", a->dequant, "Also write the dequantized values as F32");
    cmd->add_flag("--single-level", a->single_level, "NVFP4 without the per-tensor float32 scale");
    cmd->add_flag("--compare-rules", a->compare,
                  "Per tensor: blocks whose scale differs between rules, and each rule's error");
    add_output_flags(cmd, a->json, a->threads);
    cmd->footer(
        "Examples: roundscope mx acts.safetensors --format mxfp8_e4m3 -o acts-mx.safetensors --dequant\n"
        "          roundscope mx kv.safetensors:v --format mxfp4 --axis -2 --compare-rules\n");
    cmd->callback([a] {
        const emu::BlockSpec spec = spec_of(*a);
        const TensorSelection selection = parse_tensor_selection(a->input);
        MxArgs args = *a;
        args.input = selection.path;
        if (selection.name) args.names.push_back(*selection.name);  // IN:NAME is -t NAME
        if (!args.compare) {
            if (args.output.empty()) throw Error("mx needs -o OUT (or --compare-rules)");
            check_output("-o", args.output, {args.input});
        }
        const TensorFile in = read_input(args.input);
        if (args.compare) return compare_rules(args, spec, in);
        quantize(args, spec, in);
    });
}

}  // namespace roundscope::cli
