// `roundscope formats [--json]`: one row per format descriptor of emu/numbers/format.hpp.
#include <memory>
#include <string>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "api/catalog.hpp"
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
            print_json(api::formats_json());
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
