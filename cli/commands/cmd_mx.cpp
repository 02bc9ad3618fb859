// `roundscope mx IN --format BLOCKFMT [--block K] [--axis A] [--offset O] [--scale-rule RULE]
//  [--round MODE] [-t NAME]... (-o OUT [--dequant] | --compare-rules) [--json]`:
// block quantization of the floating tensors of a file (docs/cli.md).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "api/mx_call.hpp"
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

api::MxRequest request_of(const MxArgs& a) {
    api::MxRequest r;
    r.names = a.names, r.format = a.format, r.block = a.block, r.axis = a.axis, r.offset = a.offset;
    r.scale_rule = a.rule, r.rounding = a.round, r.seed = a.seed, r.single_level = a.single_level;
    r.dequant = a.dequant, r.threads = a.threads;
    r.source = file_source(a.input);
    return r;
}

void compare_rules(const MxArgs& a) {
    const nlohmann::json j = api::mx_compare_rules(request_of(a));
    if (a.json) {
        print_json(j);
        return;
    }
    std::vector<std::vector<std::string>> rows;
    for (const nlohmann::json& t : j.at("tensors"))
        for (const nlohmann::json& r : t.at("rules"))
            rows.push_back(
                {t.at("name").get<std::string>(), r.at("rule").get<std::string>(),
                 fmt::format("{} / {}", r.at("blocks_differing_from_floor").get<std::uint64_t>(),
                             t.at("blocks").get<std::uint64_t>()),
                 std::to_string(r.at("scale_up").get<std::uint64_t>()),
                 std::to_string(r.at("scale_down").get<std::uint64_t>()),
                 std::to_string(r.at("saturated").get<std::uint64_t>()),
                 fmt::format("{:.4g}", json_number_value(r.at("max_abs_error"), "max_abs_error")),
                 fmt::format("{:.4g}", json_number_value(r.at("rms_error"), "rms_error")),
                 fmt::format("{:.4g}", json_number_value(r.at("relative_rms_error"), "relative_rms_error"))});
    print_table({"tensor", "rule", "blocks != floor", "scale up", "scale down", "saturated", "max_abs_error",
                 "rms_error", "rel_rms_error"},
                rows);
}

void quantize(const MxArgs& a) {
    const api::TensorAnswer answer = api::mx_quantize(request_of(a));
    write_output(a.output, answer.tensors, answer.metadata);
    if (a.json) {
        nlohmann::json j = answer.json;
        j["output"] = a.output;
        print_json(j);
        return;
    }
    const nlohmann::json& j = answer.json;
    fmt::print("{} -> {} ({}, blocks of {} along axis {}, scale rule {})\n", a.input, a.output, a.format,
               j.at("block").get<int>(), a.axis, j.at("scale_rule").get<std::string>());
    std::vector<std::vector<std::string>> rows;
    for (const nlohmann::json& t : j.at("tensors"))
        rows.push_back({t.at("name").get<std::string>(), shape_string(t.at("shape").get<Shape>()),
                        std::to_string(t.at("blocks").get<std::uint64_t>()),
                        std::to_string(t.at("nan_blocks").get<std::uint64_t>())});
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
    cmd->add_option("--block", a->block, "Elements per block (default 32; NVFP4 16)")
        ->check(integer_in(api::ranges::mx_block));
    cmd->add_option("--axis", a->axis, "The blocked axis (-1: the last; -2: the token axis of [.., N, D])")
        ->check(integer_in(api::ranges::axis))
        ->capture_default_str();
    cmd->add_option("--offset", a->offset, "Blocks start at positions j * block - offset")
        ->check(integer_in(api::ranges::mx_offset))
        ->capture_default_str();
    cmd->add_option("--scale-rule", a->rule, "MX shared-exponent rule: floor (OCP) ceil even rceil")
        ->check(accepted_by([](const std::string& name) { emu::parse_scale_rule(name, ""); }, "RULE"))
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
        api::block_spec(request_of(*a));  // a bad option before anything is read or written
        if (a->compare && emu::block_format_named(a->format).nvfp4)
            throw Error("--compare-rules: applies to MX formats; NVFP4 has one scale rule");
        const TensorSelection selection = parse_tensor_selection(a->input);
        MxArgs args = *a;
        args.input = selection.path;
        if (selection.name) args.names.push_back(*selection.name);  // IN:NAME is -t NAME
        if (args.compare) return compare_rules(args);
        if (args.output.empty()) throw Error("mx needs -o OUT (or --compare-rules)");
        check_output("-o", args.output, {args.input});
        quantize(args);
    });
}

}  // namespace roundscope::cli
