#pragma once
// Softmax overflow margins (the "Flash Attention Fixed Everything" report): exp overflows float32 and bfloat16 above
// ln(3.40e38) = 88.72 and float16 above ln(65504) = 11.09. A softmax without max subtraction overflows when a row's
// largest score passes that, and its row sum when the row's log-sum-exp does; with max subtraction (and in the online
// softmax of flash attention) exp only sees arguments <= 0 and the sum is at most the number of keys. Margins are
// computed from the exact scores; the emulated naive and online kernels run on the same rows to show what each gives.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "emu/attention/inputs/attention_inputs.hpp"

namespace roundscope::emu {
class RunCache;  // emu/attention/flash/run_cache.hpp
}

namespace roundscope::analysis {

struct HeadroomOptions {
    bool causal = false;
    double softmax_scale = 0;
    int threads = 0;
    emu::RunCache* runs = nullptr;  // S shared with the other analyses of these inputs (the report)
    // The emulated runs (three softmaxes a format, each a whole forward pass) only for a format
    // whose smallest naive margin is below this many nats; the others' counts stay empty (not
    // run). The report sets it (api/report/report_tasks.cpp); every format by default.
    double emulate_within = std::numeric_limits<double>::infinity();
};

struct RowHeadroom {
    std::uint64_t head, row;
    double max_score;  // the largest scaled score of the row (exact products, double sum)
    double lse;        // log-sum-exp of the row
};

struct FormatHeadroom {
    std::string format;                     // f32, f16, bf16
    double ln_max;                          // ln of the largest finite value
    std::uint64_t naive_exp_overflow_rows;  // max score > ln_max
    std::uint64_t naive_sum_overflow_rows;  // lse > ln_max (includes the above)
    std::uint64_t shifted_overflow_rows;    // lse - max score > ln_max (more keys than the max value)
    double min_naive_margin;                // min over rows of ln_max - lse
    // Rows with a NaN or Inf output, emulated (empty: not run, see HeadroomOptions::emulate_within):
    std::optional<std::uint64_t> emulated_naive_nonfinite_rows;    // naive without max subtraction
    std::optional<std::uint64_t> emulated_shifted_nonfinite_rows;  // naive with max subtraction
    std::optional<std::uint64_t> emulated_online_nonfinite_rows;   // the online softmax
    // Rows whose output came out all zero, finite, though a key they see has a non-zero V: a
    // sum that overflowed to Inf divides every exp to zero (silently wrong, not NaN):
    std::optional<std::uint64_t> emulated_naive_zero_rows, emulated_shifted_zero_rows, emulated_online_zero_rows;
};

struct HeadroomResult {
    std::vector<RowHeadroom> rows;
    std::vector<FormatHeadroom> formats;
    std::string note;  // what was not run and why (empty: everything asked ran)
};

HeadroomResult headroom(const emu::AttentionInputs& in, const HeadroomOptions& options);

}  // namespace roundscope::analysis
