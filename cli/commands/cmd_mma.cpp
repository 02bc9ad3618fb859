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

#include "analysis/golden_check.hpp"
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

std::string_view rounding_name(emu::BlockRounding r) {
    switch (r) {
        case emu::BlockRounding::rz_f32:
            return "rz-f32";
        case emu::BlockRounding::rz_e8m13:
            return "rz-e8m13";
        case emu::BlockRounding::rne_f16:
            return "rne-f16";
    }
    return "?";
}

nlohmann::json model_json(const emu::MmaModel& m) {
    return {{"name", emu::mma_model_name(m)},
            {"arch", m.arch},
            {"instruction", m.instruction},
            {"shape", m.shape},
            {"a", emu::ptx_input_name(m, m.a)},
            {"b", emu::ptx_input_name(m, m.b)},
            {"accumulator", m.accumulator.name},
            {"block_length", m.block_length},
            {"alignment_bits", m.alignment_bits},
            {"zero_exponent", m.zero_exponent},
            {"rounding", rounding_name(m.rounding)},
            {"c_entry", m.c_entry == emu::AccumulatorEntry::first_block ? "first-block" : "added-after"},
            {"k_order", m.k_order == emu::KOrder::sequential ? "sequential" : "pair-interleaved"},
            {"evidence", m.evidence}};
}

void list_models(bool json) {
    nlohmann::json models = nlohmann::json::array();
    std::vector<std::vector<std::string>> rows;
    for (const emu::MmaModel& m : emu::all_mma_models()) {
        models.push_back(model_json(m));
        rows.push_back({emu::mma_model_name(m), std::to_string(m.block_length), std::to_string(m.alignment_bits),
                        std::to_string(m.zero_exponent), std::string(rounding_name(m.rounding)),
                        m.c_entry == emu::AccumulatorEntry::first_block ? "first block" : "added after (RN)",
                        m.k_order == emu::KOrder::sequential ? "sequential" : "pair-interleaved"});
    }
    if (json) {
        print_json(nlohmann::json{{"models", models}});
        return;
    }
    print_table({"model", "L", "F", "e_zero", "block rounding", "C enters", "K order"}, rows);
}

void run_mma(const MmaOptions& o) {
    if (o.list) {
        list_models(o.json);
        return;
    }
    if (o.input.empty()) throw Error("mma: IN is required (or --list)");
    if (!o.instruction.empty()) {
        std::vector<std::string> known;
        for (const emu::MmaModel& m : emu::all_mma_models())
            if (std::find(known.begin(), known.end(), m.instruction) == known.end()) known.emplace_back(m.instruction);
        if (std::find(known.begin(), known.end(), o.instruction) == known.end()) {
            std::string names;
            for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
            throw Error(fmt::format("--instruction: unknown instruction '{}'{} (known: {})", printable(o.instruction),
                                    did_you_mean(o.instruction, known), names));
        }
    }
    if (!o.output.empty()) check_output("-o", o.output, {o.input});
    const TensorFile file = read_input(o.input);
    // A capture says which device and instruction it ran on (as `check` reads it): its model is
    // theirs unless --arch or --instruction asks for another (a what-if: the JSON names both)
    const analysis::CaptureModel capture = analysis::capture_model(file);
    const std::string arch = o.arch_given || capture.arch.empty() ? o.arch : capture.arch;
    const std::string instruction =
        !o.instruction.empty() || capture.instruction.empty() ? o.instruction : capture.instruction;
    const emu::MmaProblem p = emu::load_mma_problem(file, arch, instruction);
    if (o.check && !p.d.has_value())
        throw Error(fmt::format("{}: --check needs a tensor 'D' (the GPU's result)", o.input));

    std::vector<std::uint32_t> d(p.c.size());
    emu::mma_gemm(*p.model, p.operands(d.data()), o.threads);

    const Shape shape = p.batched ? Shape{static_cast<std::uint64_t>(p.batch), static_cast<std::uint64_t>(p.m),
                                          static_cast<std::uint64_t>(p.n)}
                                  : Shape{static_cast<std::uint64_t>(p.m), static_cast<std::uint64_t>(p.n)};
    if (!o.output.empty()) {
        Tensor out = Tensor::zeros("D", emu::dtype_of(p.model->accumulator), shape);
        for (std::size_t i = 0; i < d.size(); ++i) out.set_bits_at(i, d[i]);
        write_output(o.output, std::span<const Tensor>(&out, 1),
                     {{"roundscope.model", emu::mma_model_name(*p.model)}, {"roundscope.source", o.input}});
    }

    nlohmann::json result{{"file", o.input},
                          {"arch", p.model->arch},
                          {"instruction", p.model->instruction},
                          {"model", emu::mma_model_name(*p.model)},
                          {"shape", shape}};
    if (!capture.arch.empty() || !capture.instruction.empty())
        result["capture"] = {{"arch", capture.arch}, {"instruction", capture.instruction}};
    std::uint64_t matched = 0;
    if (o.check) {
        const int width = p.model->accumulator.bits;
        const emu::MmaCheck check = emu::check_mma(p, d);
        matched = check.matched;
        nlohmann::json first = nlohmann::json::array();
        for (const emu::MmaCheck::Mismatch& m : check.first)
            first.push_back({{"tile", m.tile},
                             {"row", m.row},
                             {"col", m.col},
                             {"c", hex_bits(m.c, width)},
                             {"expected", hex_bits(m.expected, width)},
                             {"model", hex_bits(m.model, width)}});
        result["matched"] = check.matched;
        result["total"] = check.total;
        result["first_mismatches"] = first;
        if (!p.dist.empty()) {
            nlohmann::json per = nlohmann::json::object();
            for (const auto& [dist, count] : check.by_dist) per[std::to_string(dist)] = count;
            result["mismatches_by_dist"] = per;
        }
    }
    if (o.json) {
        print_json(result);
    } else {
        fmt::print("{}: {} on {} tile(s) of {}x{}x{}\n", o.input, emu::mma_model_name(*p.model), p.batch, p.m, p.n,
                   p.k);
        if (o.check) {
            fmt::print("matched {} of {} outputs bit for bit ({:.6g}%)\n", matched, d.size(),
                       d.empty() ? 100.0 : 100.0 * static_cast<double>(matched) / static_cast<double>(d.size()));
            for (const auto& m : result["first_mismatches"]) {
                fmt::print("  tile {} row {} col {}: C {} GPU {} model {}\n", m["tile"].get<std::int64_t>(),
                           m["row"].get<std::int64_t>(), m["col"].get<std::int64_t>(), m["c"].get<std::string>(),
                           m["expected"].get<std::string>(), m["model"].get<std::string>());
            }
        }
        if (!o.output.empty()) fmt::print("wrote D to {}\n", o.output);
    }
    if (o.check && matched < d.size()) throw ExitCode{1};
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
