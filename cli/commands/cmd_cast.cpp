// `roundscope cast VALUE... --to FMT`: round values into a format and show the bits.
// `roundscope cast IN --to FMT [-t NAME]... [--scale S] -o OUT`: the same for whole tensors.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/cast_flags.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/exact_value.hpp"
#include "cli/option_checks.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/numbers/cast_options.hpp"
#include "emu/numbers/format.hpp"
#include "emu/numbers/round.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::cli {
namespace {

struct CastArgs {
    std::vector<std::string> values;
    std::string from;
    CastFlags flags;
    bool json = false;
    std::string output;              // tensor mode: OUT
    std::vector<std::string> names;  // tensor mode: only these tensors (default: every floating one)
    double scale = 1.0;
    int threads = 0;
};

/// Sign, exponent and mantissa fields of a pattern, as the format lays them out (-1: none).
struct Fields {
    long long sign = -1, exponent = -1, mantissa = -1;
};
Fields fields_of(const emu::Format& f, std::uint64_t bits) {
    Fields r;
    if (f.is_signed) r.sign = static_cast<long long>((bits >> (f.bits - 1)) & 1);
    if (f.encoding == emu::Encoding::int8) {
        r.mantissa = static_cast<long long>(bits & 0x7F);
        return r;
    }
    r.exponent = static_cast<long long>((bits >> f.man_bits) & emu::exponent_field_max(f));
    if (f.man_bits > 0) r.mantissa = static_cast<long long>(bits & emu::fraction_mask(f));
    return r;
}

std::string field_text(long long v) { return v < 0 ? "-" : std::to_string(v); }

/// A VALUE read: what is rounded, and its exact value as text for the error columns.
struct Input {
    emu::Unpacked value;
    std::string exact_text;
};

Input read_value(const CastArgs& args, const std::string& text) {
    if (args.from.empty()) return {parse_exact_value(text).odd62, text};
    const emu::Format& from = emu::format_named(args.from);
    std::uint64_t bits = 0;
    std::size_t used = 0;
    try {
        bits = std::stoull(text, &used, 0);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || (from.bits < 64 && bits >> from.bits != 0))
        throw Error("value '" + text + "' is not a " + std::to_string(from.bits) + "-bit pattern of " +
                    std::string(from.name) + " (with --from, VALUE is raw bits such as 0x7e)");
    return {emu::unpack(from, bits), fmt::format("{:a}", emu::decode(from, bits))};
}

void run_cast(const CastArgs& args) {
    const emu::Format& to = emu::format_named(args.flags.to);
    const emu::CastOptions options = args.flags.options(to);
    nlohmann::json results = nlohmann::json::array();
    std::vector<std::vector<std::string>> rows;
    for (std::size_t i = 0; i < args.values.size(); ++i) {
        const std::string& text = args.values[i];
        const Input input = read_value(args, text);
        const std::uint64_t bits = emu::round_to_format(to, input.value, options, i);
        const double value = emu::decode(to, bits);
        const CastError error = cast_error(input.exact_text, value);
        const Fields fields = fields_of(to, bits);
        results.push_back({{"input", text},
                           {"bits", hex_bits(bits, to.bits)},
                           {"sign", fields.sign < 0 ? nlohmann::json() : nlohmann::json(fields.sign)},
                           {"exponent", fields.exponent < 0 ? nlohmann::json() : nlohmann::json(fields.exponent)},
                           {"mantissa", fields.mantissa < 0 ? nlohmann::json() : nlohmann::json(fields.mantissa)},
                           {"value", json_number(value)},
                           {"abs_error", json_number(error.abs_error)},
                           {"rel_error", json_number(error.rel_error)}});
        rows.push_back({text, hex_bits(bits, to.bits), field_text(fields.sign), field_text(fields.exponent),
                        field_text(fields.mantissa), format_double(value), fmt::format("{:.3e}", error.abs_error),
                        fmt::format("{:.3e}", error.rel_error)});
    }
    if (args.json) {
        print_json(nlohmann::json{{"format", to.name},
                                  {"round", emu::rounding_mode_name(options)},
                                  {"saturate", options.saturate},
                                  {"results", results}});
        return;
    }
    fmt::print("{} <- {} ({}, {})\n", to.name, args.from.empty() ? "exact value" : args.from,
               emu::rounding_mode_name(options), options.saturate ? "saturating" : "not saturating");
    print_table({"input", "bits", "sign", "exponent", "mantissa", "value", "abs_error", "rel_error"}, rows);
}

// Tensor mode: every chosen floating tensor of IN rounded into --to, the rest copied.
void run_cast_file(const CastArgs& args) {
    if (args.values.size() != 1)
        throw Error("cast -o OUT takes one input file, not " + std::to_string(args.values.size()) + " arguments");
    if (!args.from.empty()) throw Error("--from applies to VALUEs, not to tensor files");
    const emu::Format& to = emu::format_named(args.flags.to);
    const TensorSelection selection = parse_tensor_selection(args.values[0]);
    check_output("-o", args.output, {selection.path});
    const TensorFile in = read_input(selection.path);
    std::vector<std::string> names = args.names;
    if (selection.name) names.push_back(*selection.name);  // IN:NAME is -t NAME
    for (const std::string& n : names) in.get(n);          // an Error naming the file for unknown names
    std::vector<Tensor> out;
    nlohmann::json report = nlohmann::json::array();
    std::vector<std::vector<std::string>> rows;
    for (std::size_t i = 0; i < in.tensors.size(); ++i) {
        const Tensor& t = in.tensors[i];
        const bool chosen =
            names.empty() ? is_floating(t.dtype()) : std::find(names.begin(), names.end(), t.name()) != names.end();
        if (!chosen) {
            out.push_back(t);
            continue;
        }
        emu::CastOptions options = args.flags.options(to);
        // Each tensor its own random streams: element j of tensor i is keyed by (seed', j).
        options.seed += 0x9E3779B97F4A7C15ull * i;
        out.push_back(emu::cast_tensor(t, to, options, args.scale, args.threads));
        report.push_back(
            {{"name", t.name()}, {"from", std::string(name(t.dtype()))}, {"to", to.name}, {"count", t.size()}});
        rows.push_back({t.name(), std::string(name(t.dtype())), std::string(to.name), std::to_string(t.size())});
    }
    write_output(args.output, out, in.metadata);
    if (args.json) {
        print_json(nlohmann::json{{"input", args.values[0]}, {"output", args.output}, {"tensors", report}});
        return;
    }
    fmt::print("{} -> {} ({}, {})\n", args.values[0], args.output, emu::rounding_mode_name(args.flags.options(to)),
               args.flags.options(to).saturate ? "saturating" : "not saturating");
    print_table({"tensor", "from", "to", "elements"}, rows);
}

}  // namespace

void add_cast_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("cast", "Round values (or tensors) into a format");
    auto args = std::make_shared<CastArgs>();
    cmd->add_option("VALUE", args->values, "Decimal or hex-float values; raw bits with --from; or IN with -o")
        ->required();
    cmd->add_option("--from", args->from, "Read each VALUE as a raw bit pattern of this format")->check(format_name());
    add_cast_flags(*cmd, args->flags);
    cmd->add_flag("--json", args->json, "Print one JSON object");
    cmd->add_option("-o,--output", args->output, "Cast the tensors of file IN and write them to OUT");
    cmd->add_option("-t,--tensor", args->names, "With -o: cast only this tensor (repeatable)");
    cmd->add_option("--scale", args->scale, "With -o: multiply by S before rounding (one rounding in all)")
        ->check(finite_in(-1e300, 1e300))
        ->capture_default_str();
    cmd->add_option("--threads", args->threads, "Worker threads (0: all cores)")
        ->check(thread_count())
        ->capture_default_str();
    cmd->footer(
        "Examples: roundscope cast 0.1 448 465 --to e4m3\n"
        "          roundscope cast -- -inf 1e-3 --to e5m2 --round sr --seed 7\n"
        "          roundscope cast model.safetensors --to bf16 -o model-bf16.safetensors\n");
    cmd->callback([args] {
        if (!args->output.empty()) return run_cast_file(*args);
        if (!args->names.empty() || args->scale != 1.0) throw Error("-t and --scale apply with -o OUT (tensor files)");
        run_cast(*args);
    });
}

}  // namespace roundscope::cli
