// The rows the truth computes as one (attention_truth.hpp, TruthUnit): a key-value head's group
// of query heads, their keys and their bias from the inputs' mask.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "analysis/truth/attention_truth.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "lib/error.hpp"

namespace roundscope::analysis {

TruthUnit::TruthUnit(const emu::AttentionInputs& in, bool causal, std::uint64_t unit) {
    const std::uint64_t g = emu::kv_group(in), nq = in.n_q;
    first_head_ = unit * g, rows_ = g * nq, n_kv_ = in.n_kv;
    const std::uint64_t problem_rows = in.query_rows ? in.query_rows_of : nq;
    const emu::ScoreMask& mask = in.mask;
    // A per-key bias where the band does not end a prefix: the dense masks and a window's start.
    const bool bias = !mask.dense.empty() || mask.window_left >= 0;
    if (bias) bias_.assign(rows_ * n_kv_, 0.0);
    keys_.resize(rows_);
    for (std::uint64_t i = 0; i < rows_; ++i) {
        const std::uint64_t head = first_head_ + i / nq, row = i % nq;
        const std::uint64_t position = in.query_rows ? (*in.query_rows)[row] : row;
        const emu::KeyRange band = mask.band(position, problem_rows, n_kv_, causal);
        keys_[i] = band.end;
        if (!bias) continue;
        double* b = bias_.data() + i * n_kv_;
        for (std::uint64_t j = 0; j < band.end; ++j) {
            b[j] = j < band.begin ? -std::numeric_limits<double>::infinity() : mask.dense_at(head, position, j);
            if (std::isnan(b[j]) || b[j] == std::numeric_limits<double>::infinity())
                throw Error(fmt::format("truth: tensor '{}' holds NaN or +Inf; only -inf (a masked key) is allowed",
                                        mask.dense.front().tensor().name()));
        }
    }
}

}  // namespace roundscope::analysis
