#include "api/mma_call.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "analysis/golden_check.hpp"
#include "api/argument_checks.hpp"
#include "api/argument_error.hpp"
#include "api/json_numbers.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/mma/mma_model.hpp"
#include "emu/mma/mma_tensors.hpp"
#include "lib/suggest.hpp"

namespace roundscope::api {
namespace {

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

void check_instruction(const std::string& instruction) {
    std::vector<std::string> known;
    for (const emu::MmaModel& m : emu::all_mma_models())
        if (std::find(known.begin(), known.end(), m.instruction) == known.end()) known.emplace_back(m.instruction);
    if (std::find(known.begin(), known.end(), instruction) != known.end()) return;
    std::string names;
    for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
    throw ArgumentError("instruction", fmt::format("unknown instruction '{}'{} (known: {})", printable(instruction),
                                                   did_you_mean(instruction, known), names));
}

}  // namespace

nlohmann::json mma_models_json() {
    nlohmann::json models = nlohmann::json::array();
    for (const emu::MmaModel& m : emu::all_mma_models()) models.push_back(model_json(m));
    return {{"models", models}};
}

void check_mma_request(const MmaRequest& request) {
    check_in("threads", request.threads, ranges::threads);
    if (request.arch) for_argument("arch", [&] { emu::check_mma_architecture(*request.arch); });
    if (request.instruction && !request.instruction->empty()) check_instruction(*request.instruction);
}

MmaAnswer mma(const MmaRequest& request) {
    check_mma_request(request);
    if (!request.source.has_file()) throw Error("mma: needs an input file");
    const TensorFile file = naming_input(request.source, [&] { return request.source.read(); });
    // A capture says which device and instruction it ran on (as `check` reads it): its model is
    // theirs unless arch or instruction asks for another (a what-if: the JSON names both)
    const analysis::CaptureModel capture = analysis::capture_model(file);
    const std::string arch = request.arch || capture.arch.empty() ? request.arch.value_or("sm90") : capture.arch;
    const std::string instruction =
        request.instruction || capture.instruction.empty() ? request.instruction.value_or("") : capture.instruction;
    const emu::MmaProblem p =
        naming_input(request.source, [&] { return emu::load_mma_problem(file, arch, instruction); });
    if (request.check && !p.d.has_value())
        throw ArgumentError("check", fmt::format("needs a tensor 'D' (the GPU's result) in {}", request.source.name));

    std::vector<std::uint32_t> d(p.c.size());
    emu::mma_gemm(*p.model, p.operands(d.data()), request.threads);

    const Shape shape = p.batched ? Shape{static_cast<std::uint64_t>(p.batch), static_cast<std::uint64_t>(p.m),
                                          static_cast<std::uint64_t>(p.n)}
                                  : Shape{static_cast<std::uint64_t>(p.m), static_cast<std::uint64_t>(p.n)};
    MmaAnswer a;
    a.d = Tensor::zeros("D", emu::dtype_of(p.model->accumulator), shape);
    for (std::size_t i = 0; i < d.size(); ++i) a.d.set_bits_at(i, d[i]);
    a.model = emu::mma_model_name(*p.model);
    a.total = d.size();
    a.json = {{"file", request.source.name},
              {"arch", p.model->arch},
              {"instruction", p.model->instruction},
              {"model", a.model},
              {"shape", shape},
              {"tiles", p.batch},
              {"m", p.m},
              {"n", p.n},
              {"k", p.k}};
    if (!capture.arch.empty() || !capture.instruction.empty())
        a.json["capture"] = {{"arch", capture.arch}, {"instruction", capture.instruction}};
    if (request.check) {
        const int width = p.model->accumulator.bits;
        const emu::MmaCheck check = emu::check_mma(p, d);
        a.matched = check.matched;
        nlohmann::json first = nlohmann::json::array();
        for (const emu::MmaCheck::Mismatch& m : check.first)
            first.push_back({{"tile", m.tile},
                             {"row", m.row},
                             {"col", m.col},
                             {"c", hex_bits(m.c, width)},
                             {"expected", hex_bits(m.expected, width)},
                             {"model", hex_bits(m.model, width)}});
        a.json["matched"] = check.matched;
        a.json["total"] = check.total;
        a.json["first_mismatches"] = first;
        if (!p.dist.empty()) {
            nlohmann::json per = nlohmann::json::object();
            for (const auto& [dist, count] : check.by_dist) per[std::to_string(dist)] = count;
            a.json["mismatches_by_dist"] = per;
        }
    }
    return a;
}

}  // namespace roundscope::api
