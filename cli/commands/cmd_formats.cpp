// `roundscope formats [--json]`: one row per format descriptor of emu/numbers/format.hpp.
#include <memory>
#include <string>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "emu/numbers/format_info.hpp"

namespace roundscope::cli {

void add_formats_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("formats", "List every number format with its parameters");
    auto json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "Print one JSON object");
    cmd->footer("Example: roundscope formats --json\n");
    cmd->callback([json] {
        if (*json) {
            nlohmann::json list = nlohmann::json::array();
            for (const emu::Format& f : emu::all_formats) {
                const emu::FormatInfo i = emu::format_info(f);
                list.push_back({{"name", f.name},
                                {"bits", f.bits},
                                {"exp_bits", f.exp_bits},
                                {"man_bits", f.man_bits},
                                {"bias", f.bias},
                                {"max", i.max},
                                {"min_normal", i.min_normal},
                                {"min_subnormal", i.min_subnormal},
                                {"has_inf", emu::has_inf(f)},
                                {"nan", i.nan},
                                {"signed", f.is_signed},
                                {"inf", i.inf}});
            }
            print_json(nlohmann::json{{"formats", list}});
            return;
        }
        std::vector<std::vector<std::string>> rows;
        for (const emu::Format& f : emu::all_formats) {
            const emu::FormatInfo i = emu::format_info(f);
            rows.push_back({std::string(f.name), std::to_string(f.bits), std::to_string(f.exp_bits),
                            std::to_string(f.man_bits), std::to_string(f.bias), fmt::format("{:g}", i.max),
                            fmt::format("{:g}", i.min_normal), fmt::format("{:g}", i.min_subnormal), i.inf, i.nan});
        }
        print_table({"name", "bits", "exp", "man", "bias", "max", "min_normal", "min_subnormal", "inf", "nan"}, rows);
    });
}

}  // namespace roundscope::cli
