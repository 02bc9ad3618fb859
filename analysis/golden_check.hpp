#pragma once
// `roundscope check`'s work: a golden file — results a GPU or a kernel once produced — checked bit
// for bit against what roundscope computes today, so that a team can pin its kernels' and
// libraries' rounding in its own CI. Three kinds are recognised by their tensors and metadata:
//   - MMA tiles (A, B, C, D and the instruction and device in the metadata, as `roundscope
//     probe` writes them): D against the tensor-core model;
//   - conversion digests (`<format>_gpu` [256] u64, as `probe` writes them): the GPU's digests
//     against the emulated conversion's over all 2^32 float32 inputs;
//   - attention dumps naming a recipe (q, k, v, the kernel's outputs, and metadata "recipe" with
//     optional "recipe_settings"): every output against the recipe's emulation (`compare`).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/kernel_compare.hpp"
#include "lib/tensor.hpp"

namespace roundscope::analysis {

enum class GoldenKind { mma_tiles, conversion_digests, attention_dump };

/// What kind of golden file `file` is; nullopt for a file of none of the three kinds.
std::optional<GoldenKind> golden_kind(const TensorFile& file);

/// One check: a file, or one conversion of a digest file.
struct GoldenCase {
    std::string name;  // what was checked: "sm90 mma.sync e4m3", "f32 -> bf16", "recipe fa2-bf16"
    bool passed = false;
    std::uint64_t matched = 0, total = 0;  // elements, chunks of 2^24 inputs, or output bit patterns
    std::string detail;                    // the first difference, or why the file cannot be checked
};

/// The architecture and instruction an MMA capture records (metadata "arch", or "device" with
/// (sm_NN) as `probe` writes it; "instruction": the PTX instruction, mma.sync... or wgmma...):
/// the one reading of them that `check` and `mma --check` share. Empty where the metadata holds
/// none; an Error naming the file for an instruction that is neither.
struct CaptureModel {
    std::string arch, instruction;
};
CaptureModel capture_model(const TensorFile& file);

/// Throws Error naming the file when a golden file of `kind` cannot be checked: no architecture
/// in an MMA file's metadata, digests of the wrong size, a recipe or setting the emulator does
/// not know, tensors that do not fit together. Cheap: run it on every file before any check.
void validate_golden(const TensorFile& file, GoldenKind kind);

/// How close an attention dump's outputs must come to its recipe's, output by output (`check`'s
/// --max-ulp, --max-row-ulp, --min-match, --rtol and --atol); none set: every bit. MMA tiles
/// and conversion digests are always checked bit for bit.
struct DumpTolerance {
    std::optional<std::uint64_t> max_ulp;  // as numpy.testing.assert_array_max_ulp: no element further
    std::optional<double> max_row_ulp;     // OutputComparison::max_row_ulp at most this
    std::optional<double> min_match;       // at least this share of the bit patterns equal, in [0, 1]
    std::optional<Tolerance> close;        // every element within rtol and atol (torch.testing)
    bool exact() const { return !max_ulp && !max_row_ulp && !min_match && !close; }
};

/// The checks of a golden file of kind `kind` (validated): one case per file, or per conversion.
std::vector<GoldenCase> check_golden(const TensorFile& file, GoldenKind kind, int threads = 0,
                                     const DumpTolerance& tolerance = {});

/// Whether one output of a dump passes `tolerance`, and if not, why, in one clause
/// ("o: 120 of 8192 differ, max 3 ulp (0.5 of its row's scale)"); empty when it passes.
std::string output_failure(const OutputComparison& o, const DumpTolerance& tolerance);

}  // namespace roundscope::analysis
