#pragma once
// `roundscope attention`'s work: a recipe run by the emulator on a file's tensors, and, when
// asked, each output's error against the ground truth (analysis/truth).
#include <map>
#include <optional>
#include <string>

#include "analysis/truth/attention_truth.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"

namespace roundscope::emu {
class RunCache;  // emu/attention/flash/run_cache.hpp
}

namespace roundscope::analysis {

struct AttentionRunOptions {
    bool causal = false;
    double scale = 0;  // 0: 1/sqrt(D) (rounded to float32, as the kernels take it)
    bool backward = false;
    bool truth = false;
    bool key_gradients =
        true;  // with backward: dK and dV too (the emulator's, and with truth the truth's and their errors)
    int threads = 0;
    // The truth of the inputs themselves, when the caller has it (the report computes it once for
    // every recipe it compares): used where it answers the run's mask, scale and passes.
    const AttentionTruth* known_truth = nullptr;
    // compare_kernel_head: the truth of the head's key-value group (its dK and dV), likewise
    const AttentionTruth* known_group_truth = nullptr;
    emu::RunCache* runs = nullptr;  // S and forward passes shared with other runs (the report)
};

/// An output's error against the truth: max |x - t|, sqrt(mean (x - t)^2), and the rms error
/// relative to the truth's rms.
struct ErrorStats {
    double max_abs = 0, rms = 0, rel_rms = 0;
};

/// What ErrorStats is made of, kept so that heads compared apart merge into the file's figures:
/// the largest |error| (NaN once any is), the sums of squared errors and squared truths, each
/// summed in element order within a head and then over the heads in order, and the count.
struct ErrorSums {
    double max_abs = 0, squared = 0, norm = 0;
    std::uint64_t finite = 0;
};

/// x's error against the truth, as sums (compare merges them over heads), and as ErrorStats.
ErrorSums error_sums(const std::vector<double>& x, const std::vector<double>& truth);
ErrorStats error_stats_of(const ErrorSums& s);

struct AttentionRun {
    emu::AttentionRecipe recipe;
    emu::AttentionShape shape;
    emu::ForwardResult forward;
    std::optional<emu::BackwardResult> backward;
    std::map<std::string, ErrorStats> errors;  // by output name ("o", "lse", "dq", ...), with truth
    std::optional<AttentionTruth> truth;       // with truth
};

/// Errors (naming the tensor or recipe) for NaN or Inf inputs, a missing dO, or a recipe the
/// emulator cannot run (or a mask it cannot take: flash_context says why).
AttentionRun run_attention(const emu::AttentionInputs& in, const emu::AttentionRecipe& recipe,
                           const AttentionRunOptions& options);

/// Bit patterns of format f as doubles (exact).
std::vector<double> decoded(const std::vector<std::uint32_t>& bits, const emu::Format& f);

/// `in` with q, k, v (and do) replaced by the emulator's operands in format f: the inputs as a
/// kernel holds them, whose truth measures only what the kernel's arithmetic adds.
emu::AttentionInputs inputs_as_held(const emu::AttentionInputs& in, const emu::AttentionOperands& x,
                                    const emu::Format& f);

/// The statistics of x against truth (equal sizes).
ErrorStats error_stats(const std::vector<double>& x, const std::vector<double>& truth);

}  // namespace roundscope::analysis
