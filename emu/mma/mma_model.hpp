#pragma once
// Tensor-core matrix-multiply-accumulate as data: which truncated fused dot-product-add an
// instruction performs, on which architecture. The arithmetic is in fused_dot_add.hpp; this
// header only names the parameters and lists the instructions whose parameters are known.
//
// The model (Fasi, Higham, Mikaitis, Pranesh, PeerJ CS 2021; Khattak & Mikaitis,
// arXiv:2512.07004; Xie et al., "MMA-Sim", arXiv:2511.10909): one output element is a chain of
// fused dot-product-adds over blocks of L products. In each block every product is exact and
// aligned on e_a + e_b (unnormalized), the accumulator is one more term, a zero term has the
// exponent e_zero, every term is truncated toward zero to a multiple of 2^(Emax - F), the
// truncated terms are added exactly, and the sum is rounded once into the accumulator format.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "emu/numbers/format.hpp"

namespace roundscope::emu {

/// How a block's exact sum becomes the accumulator.
enum class BlockRounding : std::uint8_t {
    rz_f32,    // toward zero to float32, subnormals kept; 2^128 and above become Inf
    rz_e8m13,  // the same, then the low 10 fraction bits dropped (14-bit significand)
    rne_f16,   // nearest even to float16 (FP16-output instructions)
};

/// Where the instruction's C operand enters the chain of blocks.
enum class AccumulatorEntry : std::uint8_t {
    first_block,  // C is the accumulator term of the first block (every published model)
    added_after,  // the blocks start from +0; C is added at the end by an IEEE float32 add (RN)
};

/// The order in which an instruction's K products are cut into blocks.
enum class KOrder : std::uint8_t {
    sequential,        // k = 0..L-1, then L..2L-1, ...
    pair_interleaved,  // within each group of 4 k: the first two go to the first block of 16,
                       // the last two to the second (sm_90 FP8 mma.sync; see mma_model.cpp)
};

struct MmaModel {
    std::string_view arch;         // "sm80", "sm89", "sm90", "sm100"
    std::string_view instruction;  // "mma.sync", "wgmma", "tcgen05.mma"
    std::string_view shape;        // the PTX shape of the instruction, e.g. "m16n8k16"
    Format a, b;                   // input formats (TF32 is f32 with `dropped_input_bits` = 13)
    Format accumulator;            // C and D: f32 or f16
    int k;                         // products per instruction and output element
    int block_length;              // L
    int alignment_bits;            // F
    int zero_exponent;             // e_zero
    BlockRounding rounding;
    AccumulatorEntry c_entry = AccumulatorEntry::first_block;
    KOrder k_order = KOrder::sequential;
    int dropped_input_bits = 0;  // low bits of each input ignored (TF32 keeps the top 19)
    std::string_view evidence;   // where the parameters come from
};

/// "sm90 mma.sync m16n8k16 f32.bf16.bf16.f32": the model's full name.
std::string mma_model_name(const MmaModel& m);
/// The name of the input type as PTX spells it ("bf16", "f16", "e4m3", "e5m2", "tf32").
std::string_view ptx_input_name(const MmaModel& m, const Format& f);

/// Every instruction model roundscope knows.
std::span<const MmaModel> all_mma_models();

/// The model for `arch` and `instruction` with these input and accumulator formats; nullptr if
/// there is none. `instruction` empty picks mma.sync where it exists, else the first listed;
/// "mma.sync" its m16n8k16 (or m16n8k32, m16n8k8 for TF32); "mma.sync.m16n8k8" the m16n8k8
/// shape. f32 inputs mean TF32.
const MmaModel* find_mma_model(std::string_view arch, std::string_view instruction, const Format& a, const Format& b,
                               const Format& accumulator);

}  // namespace roundscope::emu
