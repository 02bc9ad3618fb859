// `roundscope mma IN --arch ARCH [--instruction I] [--check] [-o OUT] [--json] [--threads N]`
// and `roundscope mma --list`: D = A*B + C through a tensor-core model (emu/mma/mma_model.hpp),
// optionally checked bit for bit against the D a GPU wrote into IN.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "api/mma_call.hpp"
#include "cli/analysis_flags.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/option_checks.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/mma/mma_model.hpp"
#include "emu/mma/mma_tensors.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "lib/suggest.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::cli {
namespace {

struct MmaOptions {
    std::string input, output, arch = "sm90", instruction;
    bool arch_given = false;  // --arch on the command line (else a capture's own architecture)
    bool check = false, json = false, list = false;
    int threads = 0;
};

void list_models(bool json) {
    const nlohmann::json models = api::mma_models_json();
    if (json) {
        print_json(models);
        return;
    }
    std::vector<std::vector<std::string>> rows;
    for (const nlohmann::json& m : models.at("models"))
        rows.push_back({m.at("name").get<std::string>(), std::to_string(m.at("block_length").get<int>()),
                        std::to_string(m.at("alignment_bits").get<int>()),
                        std::to_string(m.at("zero_exponent").get<int>()), m.at("rounding").get<std::string>(),
                        m.at("c_entry") == "first-block" ? "first block" : "added after (RN)",
                        m.at("k_order").get<std::string>()});
    print_table({"model", "L", "F", "e_zero", "block rounding", "C enters", "K order"}, rows);
}

void run_mma(const MmaOptions& o) {
    if (o.list) {
        list_models(o.json);
        return;
    }
    if (o.input.empty()) throw Error("mma: IN is required (or --list)");
    api::MmaRequest request;
    if (o.arch_given) request.arch = o.arch;
    if (!o.instruction.empty()) request.instruction = o.instruction;
    request.check = o.check, request.threads = o.threads;
    api::check_mma_request(request);  // a bad instruction before the output's path
    if (!o.output.empty()) check_output("-o", o.output, {o.input});
    request.source = file_source(o.input);
    const api::MmaAnswer a = api::mma(request);
    if (!o.output.empty())
        write_output(o.output, std::span<const Tensor>(&a.d, 1),
                     {{"roundscope.model", a.model}, {"roundscope.source", o.input}});
    if (o.json) {
        print_json(a.json);
    } else {
        fmt::print("{}: {} on {} tile(s) of {}x{}x{}\n", o.input, a.model, a.json.at("tiles").get<std::int64_t>(),
                   a.json.at("m").get<std::int64_t>(), a.json.at("n").get<std::int64_t>(),
                   a.json.at("k").get<std::int64_t>());
        if (o.check) {
            fmt::print("matched {} of {} outputs bit for bit ({:.6g}%)\n", a.matched, a.total,
                       a.total == 0 ? 100.0 : 100.0 * static_cast<double>(a.matched) / static_cast<double>(a.total));
            for (const auto& m : a.json.at("first_mismatches")) {
                fmt::print("  tile {} row {} col {}: C {} GPU {} model {}\n", m["tile"].get<std::int64_t>(),
                           m["row"].get<std::int64_t>(), m["col"].get<std::int64_t>(), m["c"].get<std::string>(),
                           m["expected"].get<std::string>(), m["model"].get<std::string>());
            }
        }
        if (!o.output.empty()) fmt::print("wrote D to {}\n", o.output);
    }
    if (o.check && a.matched < a.total) throw ExitCode{1};
}

}  // namespace

void add_mma_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("mma", "D = A*B + C through a tensor-core model; --check against a GPU's D");
    auto o = std::make_shared<MmaOptions>();
    cmd->add_option("IN", o->input, "File with A [T,M,K], B [T,K,N], C [T,M,N] (and D to --check)");
    auto* arch = cmd->add_option("--arch", o->arch,
                                 "Architecture: sm80, sm89, sm90, sm100 (default: a capture's own, else sm90)")
                     ->check(accepted_by([](const std::string& name) { emu::check_mma_architecture(name); }, "ARCH"));
    cmd->add_option("--instruction", o->instruction, "mma.sync (default where it exists), wgmma, tcgen05.mma");
    cmd->add_flag("--check", o->check, "Compare with the D in IN; exit 1 on any differing bit");
    cmd->add_option("-o,--output", o->output, "Write D (the accumulator's dtype) to this file");
    cmd->add_flag("--list", o->list, "List every model with its parameters and sources");
    add_output_flags(cmd, o->json, o->threads);
    cmd->footer(
        "Examples: roundscope mma tests/data/golden/h100/mma_e4m3.safetensors --arch sm90 --check\n"
        "          roundscope mma --list\n");
    cmd->callback([o, arch] {
        o->arch_given = arch->count() > 0;
        run_mma(*o);
    });
}

}  // namespace roundscope::cli
