// `roundscope cast VALUE... --to FMT`: round values into a format and show the bits.
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "emu/cast_options.hpp"
#include "emu/format.hpp"
#include "emu/round.hpp"
#include "lib/error.hpp"
#include "tools/cli/cast_flags.hpp"
#include "tools/cli/cli_output.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/exact_value.hpp"

namespace roundscope::cli {
namespace {

struct CastArgs {
    std::vector<std::string> values;
    std::string from;
    CastFlags flags;
    bool json = false;
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

Input read_input(const CastArgs& args, const std::string& text) {
    if (args.from.empty()) return {parse_exact_value(text).odd62, text};
    const emu::Format& from = require_format(args.from, "--from");
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
    const emu::Format& to = require_format(args.flags.to, "--to");
    const emu::CastOptions options = args.flags.options(to);
    nlohmann::json results = nlohmann::json::array();
    std::vector<std::vector<std::string>> rows;
    for (std::size_t i = 0; i < args.values.size(); ++i) {
        const std::string& text = args.values[i];
        const Input input = read_input(args, text);
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
        fmt::print("{}\n", nlohmann::json{{"format", to.name},
                                          {"round", emu::rounding_mode_name(options)},
                                          {"saturate", options.saturate},
                                          {"results", results}}
                               .dump());
        return;
    }
    fmt::print("{} <- {} ({}, {})\n", to.name, args.from.empty() ? "exact value" : args.from,
               emu::rounding_mode_name(options), options.saturate ? "saturating" : "not saturating");
    print_table({"input", "bits", "sign", "exponent", "mantissa", "value", "abs_error", "rel_error"}, rows);
}

}  // namespace

void add_cast_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("cast", "Round values (or tensors) into a format");
    auto args = std::make_shared<CastArgs>();
    cmd->add_option("VALUE", args->values, "Decimal or hex-float values; raw bits with --from")->required();
    cmd->add_option("--from", args->from, "Read each VALUE as a raw bit pattern of this format");
    add_cast_flags(*cmd, args->flags);
    cmd->add_flag("--json", args->json, "Print one JSON object");
    cmd->callback([args] { run_cast(*args); });
}

}  // namespace roundscope::cli
