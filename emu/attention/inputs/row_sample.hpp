#pragma once
// Row sampling for long sequences: k of a head's query rows drawn uniformly without
// replacement, and the head's inputs reduced to them. Every analysis of attention is row by row
// in the forward pass (a row's O, LSE, P and delta depend on its own query, its own dO and the
// keys its position sees), so a sample's rows carry the bits the whole head gives them
// (tests/emu/attention/test_row_sample.cpp holds every recipe to that); a figure over the
// sample estimates the head's, and random groups of the sample give its sampling error
// (analysis/sampling_error.hpp).
#include <cstdint>
#include <memory>
#include <vector>

#include "emu/attention/inputs/attention_inputs.hpp"

namespace roundscope::emu {

/// k distinct rows of [0, n), ascending, the first k draws of a Fisher-Yates shuffle driven by
/// std::mt19937_64 seeded with `seed` (unbiased bounded draws by rejection): the same rows on
/// every platform. k >= n gives every row. The draw order (before sorting) is `order`, if given.
std::vector<std::uint64_t> sample_rows(std::uint64_t n, std::uint64_t k, std::uint64_t seed,
                                       std::vector<std::uint64_t>* order = nullptr);

/// A sample and its random groups: the draws in turn, the g-th of every `groups`; each group is
/// a sample itself, of k / groups rows (a few one more).
struct RowSample {
    std::shared_ptr<const std::vector<std::uint64_t>> rows;                 // ascending
    std::vector<std::shared_ptr<const std::vector<std::uint64_t>>> groups;  // each ascending
};
/// sample_rows(n, k, seed) split into `groups` random groups (at least 1, at most k).
RowSample sample_row_groups(std::uint64_t n, std::uint64_t k, std::uint64_t seed, std::size_t groups);

/// `head` (one head: batch 1, one head, as head_inputs gives) reduced to the query rows `rows`
/// (ascending, distinct, below n_q): q, o, do and lse keep those rows (copies); k, v and the
/// mask stay whole (the mask is read at each row's position); x and wq (the query-weight gradient's) are left out. The
/// result remembers the rows' positions (query_rows), which the causal mask and every analysis follow. Throws Error for
/// rows out of order or range, or a head that is already a sample.
AttentionInputs sampled_rows(const AttentionInputs& head, std::shared_ptr<const std::vector<std::uint64_t>> rows);

}  // namespace roundscope::emu
