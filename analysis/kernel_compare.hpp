#pragma once
// `roundscope compare`'s work: what a real kernel wrote into a dump (o, and lse, dq, dk, dv when
// present) against the exact truth of the dump's inputs and against the recipe's emulation of
// the same inputs. The truth side says how far the kernel is from the mathematics; the emulation
// side says whether the recipe is the kernel's arithmetic (every bit equal) or not.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/attention_run.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"
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

/// An element where the kernel differs from the recipe: the furthest in ulps, or the first
/// NaN or infinity where the truth is finite.
struct ElementDifference {
    Shape index;  // in the tensor's shape
    double kernel = 0, emulated = 0, truth = 0;
    std::uint64_t ulp = 0;  // kernel against the recipe
};

/// Tolerances against the recipe's emulation as torch.testing.assert_close reads them: an element
/// passes where |kernel - recipe| <= atol + rtol |recipe| (NaN against NaN, and equal
/// infinities, pass).
struct Tolerance {
    double rtol = 0, atol = 0;
};

/// What a comparison covers: the outputs named (empty: every one the file holds; a forward-only
/// recipe compares {"o", "lse"} of a dump that also holds gradients), the tolerance whose
/// failures are counted, and how many of the worst elements are kept.
struct CompareChoice {
    std::vector<std::string> outputs;
    std::optional<Tolerance> tolerance;
    std::size_t worst_count = 8;
    // false: the bits alone (matched, total, max_ulp), without computing the truth: what a
    // search over recipes scores them by.
    bool truth = true;
};

/// Element `i` (row-major) of a tensor of `shape` as its index.
Shape unravel(std::uint64_t i, const Shape& shape);

/// The outputs a kernel may write, in the order they are compared: o, lse, dq, dk, dv.
const std::vector<std::string>& kernel_output_names();

struct OutputComparison {
    std::string name;  // "o", "lse", "dq", "dk", "dv"
    DType dtype = DType::f32;
    ErrorStats truth_error;
    ErrorSums sums;                            // truth_error's makings
    std::vector<std::uint64_t> bucket_counts;  // ulp_histogram's, ulp_buckets of them
    UlpHistogram ulp_histogram;
    std::vector<WorstElement> worst;                    // largest |kernel - truth| first
    std::uint64_t matched = 0, total = 0, max_ulp = 0;  // against the emulation, bit for bit

    // Against the emulation, in the terms a kernel's CI asks in. The largest difference in ulps
    // of the output's dtype at the scale of its row (the row's largest |recipe|: a row of o, dq,
    // dk or dv along the head dimension; each lse alone), so that a value near zero whose sign
    // flipped does not dominate as it does max_ulp; infinite where a NaN or an infinity differs.
    double max_row_ulp = 0;
    std::uint64_t sign_flips_near_zero = 0;  // kernel and recipe of opposite signs where |recipe| is below one
                                             // ulp of its row's scale
    std::uint64_t nonfinite = 0;             // kernel NaN or infinite where the truth is finite
    std::optional<ElementDifference> first_nonfinite;
    std::optional<ElementDifference> largest_difference;  // the furthest from the recipe in ulps (first of ties)
    std::optional<std::uint64_t> outside_tolerance;       // elements outside CompareChoice::tolerance
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
                                const CompareChoice& choice = {});

/// The comparison of one head (counted over the batch, as emu::head_inputs counts them), with
/// indices into the file's tensors: compare_kernel is the merge of every head's. The report
/// compares each head in the task that analyses it, sharing its truth (options.known_truth:
/// the head's).
KernelComparison compare_kernel_head(const TensorFile& file, const emu::AttentionInputs& in, std::uint64_t head,
                                     const emu::AttentionRecipe& recipe, const AttentionRunOptions& options,
                                     const CompareChoice& choice = {});

/// compare_kernel_head over a sample of the head's query rows (`sample`: emu::sampled_rows of
/// head_inputs(in, head)), o and lse only (dK and dV need every row); indices are the file's.
KernelComparison compare_kernel_rows(const TensorFile& file, const emu::AttentionInputs& in, std::uint64_t head,
                                     const emu::AttentionInputs& sample, const emu::AttentionRecipe& recipe,
                                     const AttentionRunOptions& options, const CompareChoice& choice = {});

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
/// `outputs`: those compared (empty: all the file holds); a name that is not an output, or one
/// the file does not hold, is an Error.
void check_kernel_outputs(const TensorFile& file, const emu::AttentionInputs& in, const emu::AttentionRecipe& recipe,
                          const std::vector<std::string>& outputs = {});

/// The output names of a comma-separated list ("o,lse"), each one of kernel_output_names() and
/// none twice; Error (beginning "WHAT: " where `what` is not empty) otherwise.
std::vector<std::string> parse_output_names(const std::string& list, const std::string& what);

}  // namespace roundscope::analysis
