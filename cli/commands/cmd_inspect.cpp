// `roundscope inspect FILE [--json] [--dtype T] [--checksum] [--threads N]`: per tensor its
// dtype, shape, extremes, moments, special-value counts and exact representability.
#include <memory>
#include <optional>
#include <string>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "analysis/tensor_stats.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/option_checks.hpp"
#include "lib/crc32.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::cli {
namespace {

struct InspectOptions {
    std::string file;
    std::string dtype;
    bool json = false;
    bool checksum = false;
    int threads = 0;
};

std::string statistic_text(const std::optional<double>& x) { return x ? fmt::format("{:.6g}", *x) : "-"; }

void inspect(const InspectOptions& o) {
    ReadOptions read;
    read.dtype_option = "--dtype";
    if (!o.dtype.empty()) read.dtype = parse_dtype(o.dtype, "--dtype");
    const TensorFile file = read_input_selection(o.file, read);

    nlohmann::json tensors = nlohmann::json::array();
    std::vector<std::vector<std::string>> rows;
    for (const Tensor& t : file.tensors) {
        const analysis::TensorStats s = analysis::tensor_stats(t, o.threads);
        nlohmann::json exact = nlohmann::json::object();
        std::vector<std::string> exact_cells;
        for (std::size_t k = 0; k < analysis::representability_targets.size(); ++k) {
            exact[std::string(analysis::representability_targets[k]->name)] = json_number(s.exact_fraction[k]);
            exact_cells.push_back(s.exact_fraction[k] ? fmt::format("{:.4g}%", 100 * *s.exact_fraction[k]) : "-");
        }
        nlohmann::json row{{"name", t.name()},
                           {"dtype", std::string(name(t.dtype()))},
                           {"shape", t.shape()},
                           {"bytes", t.bytes().size()},
                           {"count", s.count},
                           {"min", json_number(s.min)},
                           {"max", json_number(s.max)},
                           {"mean", json_number(s.mean)},
                           {"std", json_number(s.std)},
                           {"nan", s.nan},
                           {"inf", s.inf},
                           {"zeros", s.zeros},
                           {"subnormals", s.subnormals},
                           {"exact_fraction", exact}};
        std::vector<std::string> cells{t.name(),
                                       std::string(name(t.dtype())),
                                       shape_string(t.shape()),
                                       statistic_text(s.min),
                                       statistic_text(s.max),
                                       statistic_text(s.mean),
                                       statistic_text(s.std),
                                       std::to_string(s.nan),
                                       std::to_string(s.inf),
                                       std::to_string(s.zeros),
                                       std::to_string(s.subnormals)};
        cells.insert(cells.end(), exact_cells.begin(), exact_cells.end());
        if (o.checksum) {
            const std::uint32_t crc = crc32(t.bytes());
            row["crc32"] = crc;
            cells.push_back(fmt::format("{:08x}", crc));
        }
        tensors.push_back(row);
        rows.push_back(cells);
    }
    if (o.json) {
        nlohmann::json out{{"file", o.file}, {"tensors", tensors}};
        if (!file.metadata.empty()) out["metadata"] = file.metadata;
        print_json(out);
        return;
    }
    std::vector<std::string> headers{"name", "dtype", "shape", "min",   "max",       "mean",
                                     "std",  "nan",   "inf",   "zeros", "subnormals"};
    for (const emu::Format* f : analysis::representability_targets) headers.push_back("exact " + std::string(f->name));
    if (o.checksum) headers.push_back("crc32");
    // names and metadata come from the file: escaped for the terminal (the JSON keeps them as they are)
    fmt::print("{}\n", terminal_text(o.file));
    for (const auto& [k, v] : file.metadata) fmt::print("  {} = {}\n", terminal_text(k), terminal_text(v));
    for (auto& row : rows) row.front() = terminal_text(row.front());
    print_table(headers, rows);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("inspect", "Summarize every tensor of a .safetensors or .npy file");
    auto o = std::make_shared<InspectOptions>();
    cmd->add_option("FILE", o->file, "Tensor file (.safetensors or .npy), or FILE:NAME for one tensor")->required();
    cmd->add_flag("--json", o->json, "Print one JSON object");
    cmd->add_option("--dtype", o->dtype, "Element type of an .npy saved from ml_dtypes (bf16, e4m3, ...)");
    cmd->add_flag("--checksum", o->checksum, "Add the CRC-32 of each tensor's element bytes (C order, little-endian)");
    cmd->add_option("--threads", o->threads, "Worker threads (0: all cores)")
        ->check(thread_count())
        ->capture_default_str();
    cmd->footer(
        "Examples: roundscope inspect dump.safetensors --checksum\n          roundscope inspect dump.safetensors:q "
        "--json\n");
    cmd->callback([o] { inspect(*o); });
}

}  // namespace roundscope::cli
