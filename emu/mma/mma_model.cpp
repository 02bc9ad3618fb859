// The instruction models roundscope knows, built from one row per (architecture, instruction,
// input family). Parameters and their sources are in the `evidence` of each row.
//
// The sm_90 FP8 mma.sync model is roundscope's own finding (no published model covers it). It
// reproduces all 655,360 outputs of tests/data/golden/h100/mma_{e4m3,e5m2} bit for bit, where
// the wgmma FP8 model (F = 13, e8m13) and a single fused block of 32 both fail:
//   1. the 32 products of m16n8k32 form two blocks of 16: first those with k mod 4 in {0, 1},
//      then those with k mod 4 in {2, 3} -- what converting each register's four FP8 values
//      into two f16x2 pairs and issuing two m16n8k16 FP16 MMAs would give;
//   2. each block is the sm_90 FP16 block (F = 25, e_zero = -133, RZ to float32), the first
//      starting from +0, the second from the first's result;
//   3. C is added last with an ordinary float32 add, round to nearest even.
// tests/emu/mma/test_mma_golden.cpp holds the evidence; docs/mma-fp8-sm90.md says how the
// alternatives fail.
#include "emu/mma/mma_model.hpp"

#include <fmt/format.h>

#include <vector>

namespace roundscope::emu {
namespace {

enum class Inputs : std::uint8_t { sixteen_bit, fp8, tf32 };

// One instruction family: every input combination of `inputs`, float32 output, and float16
// output where `zero_exponent_f16` is set.
struct Family {
    std::string_view arch, instruction, shape;
    Inputs inputs;
    int k, block_length, alignment_bits;
    BlockRounding rounding_f32;
    int zero_exponent_f32;
    int zero_exponent_f16;  // 0: no FP16-output variant is modelled
    AccumulatorEntry c_entry;
    KOrder k_order;
    std::string_view evidence;
};

constexpr std::string_view mmasim_ampere = "MMA-Sim (Xie et al., arXiv:2511.10909), Ampere; Fasi et al. 2021 (A100)";
constexpr std::string_view mmasim_ada = "MMA-Sim (Xie et al., arXiv:2511.10909), Ada Lovelace";
constexpr std::string_view hopper_published =
    "MMA-Sim (arXiv:2511.10909) and Khattak & Mikaitis (arXiv:2512.07004), Hopper";
constexpr std::string_view hopper_golden =
    "published Hopper model; reproduces all 655,360 outputs of tests/data/golden/h100/mma_{bf16,fp16}";
constexpr std::string_view hopper_fp8_found =
    "found by roundscope from tests/data/golden/h100/mma_{e4m3,e5m2} (all 655,360 outputs; "
    "same-type inputs measured, mixed e4m3 x e5m2 assumed)";
constexpr std::string_view hopper_wgmma_fp8 =
    "MMA-Sim and Khattak & Mikaitis (Hopper wgmma FP8: F = 13, e8m13); DeepSeek-V3 report";
constexpr std::string_view mmasim_blackwell = "MMA-Sim (arXiv:2511.10909), Blackwell";
// m16n8k8 with 16-bit inputs (HMMA.1688: CUTLASS's SM80 BF16/FP16 instruction shape, which
// PyTorch's memory-efficient kernels issue): the architecture's m16n8k16 block over the
// instruction's 8 products. Not probed; the sm_90 row reproduces the memory-efficient kernel's
// H100 captures (docs/gpu.md), where the m16n8k16 model does not.
constexpr std::string_view k8_from_k16 =
    "the m16n8k16 model's fused block over the instruction's 8 products (HMMA.1688; not probed)";
constexpr std::string_view k8_hopper =
    "the sm_90 m16n8k16 block over 8 products (HMMA.1688); reproduces PyTorch's memory-efficient kernel on "
    "the H100 captures (tests/data/golden/h100/phase-C), not probed";

constexpr auto rz = BlockRounding::rz_f32;
constexpr auto first = AccumulatorEntry::first_block;
constexpr auto seq = KOrder::sequential;

constexpr Family families[] = {
    {"sm80", "mma.sync", "m16n8k16", Inputs::sixteen_bit, 16, 8, 24, rz, -132, -20, first, seq, mmasim_ampere},
    {"sm80", "mma.sync", "m16n8k8", Inputs::tf32, 8, 4, 24, rz, -132, 0, first, seq, mmasim_ampere},
    {"sm89", "mma.sync", "m16n8k16", Inputs::sixteen_bit, 16, 8, 24, rz, -132, -20, first, seq, mmasim_ada},
    {"sm89", "mma.sync", "m16n8k8", Inputs::tf32, 8, 4, 24, rz, -132, 0, first, seq, mmasim_ada},
    {"sm89", "mma.sync", "m16n8k32", Inputs::fp8, 32, 16, 13, BlockRounding::rz_e8m13, -132, -20, first, seq,
     mmasim_ada},
    {"sm90", "mma.sync", "m16n8k16", Inputs::sixteen_bit, 16, 16, 25, rz, -133, -21, first, seq, hopper_golden},
    {"sm90", "mma.sync", "m16n8k8", Inputs::tf32, 8, 8, 25, rz, -133, 0, first, seq, hopper_published},
    {"sm90", "mma.sync", "m16n8k32", Inputs::fp8, 32, 16, 25, rz, -133, 0, AccumulatorEntry::added_after,
     KOrder::pair_interleaved, hopper_fp8_found},
    {"sm90", "wgmma", "m64nNk16", Inputs::sixteen_bit, 16, 16, 25, rz, -133, -21, first, seq, hopper_published},
    {"sm90", "wgmma", "m64nNk32", Inputs::fp8, 32, 32, 13, BlockRounding::rz_e8m13, -133, -21, first, seq,
     hopper_wgmma_fp8},
    {"sm90", "wgmma", "m64nNk8", Inputs::tf32, 8, 8, 25, rz, -133, 0, first, seq, hopper_published},
    {"sm100", "mma.sync", "m16n8k16", Inputs::sixteen_bit, 16, 16, 25, rz, -133, -21, first, seq, mmasim_blackwell},
    {"sm100", "mma.sync", "m16n8k8", Inputs::tf32, 8, 8, 25, rz, -133, 0, first, seq, mmasim_blackwell},
    {"sm100", "tcgen05.mma", "m128nNk16", Inputs::sixteen_bit, 16, 16, 25, rz, -133, -21, first, seq, mmasim_blackwell},
    {"sm100", "tcgen05.mma", "m128nNk32", Inputs::fp8, 32, 32, 25, rz, -133, -21, first, seq, mmasim_blackwell},
    {"sm100", "tcgen05.mma", "m128nNk8", Inputs::tf32, 8, 8, 25, rz, -133, 0, first, seq, mmasim_blackwell},
    // after each architecture's m16n8k16 rows: "mma.sync" alone names those (find_mma_model)
    {"sm80", "mma.sync", "m16n8k8", Inputs::sixteen_bit, 8, 8, 24, rz, -132, -20, first, seq, k8_from_k16},
    {"sm89", "mma.sync", "m16n8k8", Inputs::sixteen_bit, 8, 8, 24, rz, -132, -20, first, seq, k8_from_k16},
    {"sm90", "mma.sync", "m16n8k8", Inputs::sixteen_bit, 8, 8, 25, rz, -133, -21, first, seq, k8_hopper},
    {"sm100", "mma.sync", "m16n8k8", Inputs::sixteen_bit, 8, 8, 25, rz, -133, -21, first, seq, k8_from_k16},
};

std::vector<MmaModel> build_models() {
    std::vector<MmaModel> models;
    for (const Family& f : families) {
        auto add = [&](const Format& a, const Format& b, const Format& acc) {
            const bool f16_out = acc == f16;
            models.push_back({f.arch, f.instruction, f.shape, a, b, acc, f.k, f.block_length, f.alignment_bits,
                              f16_out ? f.zero_exponent_f16 : f.zero_exponent_f32,
                              f16_out ? BlockRounding::rne_f16 : f.rounding_f32, f.c_entry, f.k_order,
                              f.inputs == Inputs::tf32 ? 13 : 0, f.evidence});
        };
        switch (f.inputs) {
            case Inputs::sixteen_bit:
                add(bf16, bf16, f32);
                add(f16, f16, f32);
                if (f.zero_exponent_f16 != 0) add(f16, f16, f16);
                break;
            case Inputs::tf32:
                add(f32, f32, f32);
                break;
            case Inputs::fp8:
                for (const Format& a : {e4m3, e5m2}) {
                    for (const Format& b : {e4m3, e5m2}) {
                        add(a, b, f32);
                        if (f.zero_exponent_f16 != 0) add(a, b, f16);
                    }
                }
                break;
        }
    }
    return models;
}

}  // namespace

std::span<const MmaModel> all_mma_models() {
    static const std::vector<MmaModel> models = build_models();
    return models;
}

std::string_view ptx_input_name(const MmaModel& m, const Format& f) {
    if (m.dropped_input_bits != 0) return "tf32";
    return f.name;
}

std::string mma_model_name(const MmaModel& m) {
    return fmt::format("{} {} {} {}.{}.{}.{}", m.arch, m.instruction, m.shape, m.accumulator.name,
                       ptx_input_name(m, m.a), ptx_input_name(m, m.b), m.accumulator.name);
}

const MmaModel* find_mma_model(std::string_view arch, std::string_view instruction, const Format& a, const Format& b,
                               const Format& accumulator) {
    // "mma.sync.m16n8k8": the instruction and its shape
    std::string_view shape;
    if (const auto dot = instruction.rfind('.');
        dot != std::string_view::npos && instruction.substr(dot + 1) == "m16n8k8")
        shape = instruction.substr(dot + 1), instruction = instruction.substr(0, dot);
    const MmaModel* found = nullptr;
    for (const MmaModel& m : all_mma_models()) {
        if (m.arch != arch || !(m.a == a) || !(m.b == b) || !(m.accumulator == accumulator)) continue;
        if (!instruction.empty() && m.instruction != instruction) continue;
        if (!shape.empty() && m.shape != shape) continue;
        if (m.instruction == "mma.sync") return &m;
        if (found == nullptr) found = &m;
    }
    return found;
}

}  // namespace roundscope::emu
