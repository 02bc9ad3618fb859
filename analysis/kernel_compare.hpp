#pragma once
// `roundscope compare`'s work: what a real kernel wrote into a dump (o, and lse, dq, dk, dv when
// present) against the exact truth of the dump's inputs and against the recipe's emulation of
// the same inputs. The truth side says how far the kernel is from the mathematics; the emulation
// side says whether the recipe is the kernel's arithmetic (every bit equal) or not.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analysis/attention_run.hpp"
#include "emu/attention/attention_inputs.hpp"
#include "lib/tensor.hpp"

namespace roundscope::analysis {

/// One element where the kernel is furthest from the truth.
struct WorstElement {
    Shape index;  // in the tensor's shape
    double kernel = 0, truth = 0, emulated = 0;
    std::uint64_t ulp = 0;  // kernel against the truth rounded to the output's dtype
};

/// Counts of elements by their distance from the correctly rounded truth, in ulps of the
/// output's dtype: buckets 0, 1, 2-3, 4-7, ..., and "nan" (a NaN on one side only).
struct UlpHistogram {
    std::vector<std::pair<std::string, std::uint64_t>> buckets;  // label, count; empty ones left out
};

/// Bucket b of the ulp histogram: distance 0 (b = 0), [2^(b-1), 2^b) (b = 1 .. 64), NaN (65).
inline constexpr std::size_t ulp_buckets = 66;

struct OutputComparison {
    std::string name;  // "o", "lse", "dq", "dk", "dv"
    DType dtype = DType::f32;
    ErrorStats truth_error;
    ErrorSums sums;                            // truth_error's makings
    std::vector<std::uint64_t> bucket_counts;  // ulp_histogram's, ulp_buckets of them
    UlpHistogram ulp_histogram;
    std::vector<WorstElement> worst;                    // largest |kernel - truth| first
    std::uint64_t matched = 0, total = 0, max_ulp = 0;  // against the emulation, bit for bit
};

struct KernelComparison {
    emu::AttentionShape shape;
    std::vector<OutputComparison> outputs;
    std::uint64_t matched = 0, total = 0;
};

/// The file's kernel outputs against the truth and `recipe`'s emulation. Each output must have
/// the dtype the recipe writes (o: o_format; dq, dk, dv: grad_format; lse: f32) and the shape
/// the inputs imply; dq, dk and dv need do. Errors name the file and tensor; none when the file
/// holds no kernel output at all.
KernelComparison compare_kernel(const TensorFile& file, const emu::AttentionInputs& in,
                                const emu::AttentionRecipe& recipe, const AttentionRunOptions& options,
                                std::size_t worst_count = 8);

/// The comparison of one head (counted over the batch, as emu::head_inputs counts them), with
/// indices into the file's tensors: compare_kernel is the merge of every head's. The report
/// compares each head in the task that analyses it, sharing its truth (options.known_truth:
/// the head's).
KernelComparison compare_kernel_head(const TensorFile& file, const emu::AttentionInputs& in, std::uint64_t head,
                                     const emu::AttentionRecipe& recipe, const AttentionRunOptions& options,
                                     std::size_t worst_count = 8);

/// compare_kernel_head over a sample of the head's query rows (`sample`: emu::sampled_rows of
/// head_inputs(in, head)), o and lse only (dK and dV need every row); indices are the file's.
KernelComparison compare_kernel_rows(const TensorFile& file, const emu::AttentionInputs& in, std::uint64_t head,
                                     const emu::AttentionInputs& sample, const emu::AttentionRecipe& recipe,
                                     const AttentionRunOptions& options, std::size_t worst_count = 8);

/// The heads' comparisons, in head order, as the whole file's: sums and counts added, the worst
/// elements of all (largest error first, ties by position). `shape`: the file's.
KernelComparison merge_heads(const std::vector<KernelComparison>& heads, const emu::AttentionShape& shape,
                             std::size_t worst_count = 8);

/// Why `recipe` cannot be compared with the file's kernel outputs bit for bit: an output whose
/// dtype is not the one the recipe writes ("o is float32; recipe fa2-bf16 writes bf16"); empty
/// where every output's dtype is the recipe's.
std::string output_format_mismatch(const TensorFile& file, const emu::AttentionRecipe& recipe);

/// check_kernel_outputs without the dtypes: what every recipe needs of the outputs (their
/// shapes, do beside gradients).
void check_kernel_output_shapes(const TensorFile& file, const emu::AttentionInputs& in);

/// compare_kernel's checks of the file's outputs alone (an Error as it would give), before any
/// work: for a caller that runs the comparison later (the report checks every file first).
void check_kernel_outputs(const TensorFile& file, const emu::AttentionInputs& in, const emu::AttentionRecipe& recipe);

}  // namespace roundscope::analysis
