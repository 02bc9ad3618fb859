#pragma once
// Score products S = Q K^T kept for the runs that share them. The report runs one head's
// recipes many times over the same Q and K (P-collapse eight times, the bias three, FP16's
// headroom three), and S depends on nothing else: Q, K, the input format they are held in and
// the score product (a tensor-core model or float64). An element is its own row's and column's
// (the products' contract), so S kept whole equals S formed tile by tile.
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "emu/attention/flash_attention.hpp"

namespace roundscope::emu {

struct MmaModel;

class ScoreCache {
public:
    /// At most `max_bytes` of entries (their S, Q and K); the oldest go first.
    explicit ScoreCache(std::uint64_t max_bytes = std::uint64_t{512} << 20) : max_bytes_(max_bytes) {}

    /// S of every head, [heads][n_q][n_kv] float32 bits, for these operands under the recipe's
    /// input format and score product; computed (on `threads`) where no entry matches. An entry
    /// matches only if its Q and K are these, bit for bit, and its shape, mask and product are
    /// these. Only the keys each row block sees are computed (the others are zero: no run reads
    /// a masked score).
    std::shared_ptr<const std::vector<std::uint32_t>> scores(const AttentionRecipe& recipe, const AttentionShape& shape,
                                                             const AttentionOperands& in, int threads);

    std::uint64_t computed() const { return computed_; }  // entries made (misses)
    std::uint64_t reused() const { return reused_; }      // runs served from an entry

private:
    struct Entry {
        const Format* input;
        Product product;
        const MmaModel* model;  // null for the float64 product
        std::uint64_t heads, n_q, n_kv, d;
        bool causal;
        std::vector<std::uint32_t> q, k;
        std::shared_ptr<const std::vector<std::uint32_t>> s;
        std::uint64_t bytes() const { return 4 * (q.size() + k.size() + s->size()); }
    };
    std::list<Entry> entries_;
    std::uint64_t max_bytes_, computed_ = 0, reused_ = 0;
    std::mutex mutex_;
};

}  // namespace roundscope::emu
