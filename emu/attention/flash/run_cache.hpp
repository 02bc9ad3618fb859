#pragma once
// What runs over the same operands share, kept for them: the score products S = Q K^T, and
// whole forward passes. The report runs one head's recipes many times over the same Q and K
// (P-collapse four times, FP16's headroom three, the bias and the compare the attribution's
// runs again), and S depends on nothing else: Q, K, the input format they are held in and the
// score product (a tensor-core model or float64). An element is its own row's and column's (the
// products' contract), so S kept whole equals S formed tile by tile. A forward pass depends on
// its recipe, shape, Q, K, V and the counting and row options: kept, it is the very result.
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"

namespace roundscope::emu {

struct MmaModel;

class RunCache {
public:
    /// At most `max_bytes` of entries (their S, Q and K); the oldest go first.
    explicit RunCache(std::uint64_t max_bytes = std::uint64_t{512} << 20) : max_bytes_(max_bytes) {}

    /// S of every head, [heads][n_q][n_kv] float32 bits, for these operands under the recipe's
    /// input format and score product; computed (on `threads`) where no entry matches. An entry
    /// matches only if its Q and K are these, bit for bit, and its shape, mask and product are
    /// these. Only the keys each row block sees are computed (the others are zero: no run reads
    /// a masked score).
    std::shared_ptr<const std::vector<std::uint32_t>> scores(const AttentionRecipe& recipe, const AttentionShape& shape,
                                                             const AttentionOperands& in, int threads);

    /// The forward pass kept for exactly these arguments (recipe settings and name, shape, Q, K,
    /// V bit for bit, sink and rows; not the thread count, which changes no bit), or null. A
    /// sample of a head's query rows is also taken from the kept run of a sample that holds
    /// them all (its Q rows, K and V the same bits; every row's results are its own, as
    /// row_sample.hpp says), its counts summed over its row blocks of `block_m` rows.
    std::shared_ptr<const ForwardResult> forward(const AttentionRecipe& recipe, const AttentionShape& shape,
                                                 const AttentionOperands& in, const ForwardOptions& options,
                                                 std::uint64_t block_m);
    /// Keeps `result`, flash_forward's for these arguments.
    void keep_forward(const AttentionRecipe& recipe, const AttentionShape& shape, const AttentionOperands& in,
                      const ForwardOptions& options, const ForwardResult& result);

    std::uint64_t computed() const { return computed_; }  // S made (misses)
    std::uint64_t reused() const { return reused_; }      // runs served S from an entry
    std::uint64_t forwards_reused() const { return forwards_reused_; }
    std::uint64_t forwards_sliced() const { return forwards_sliced_; }  // of those, rows of a larger sample

private:
    struct RunKey {
        std::string recipe;  // name and every setting
        AttentionShape shape;
        std::uint64_t uncounted_keys, row_begin, row_end;
    };
    static bool same(const RunKey& a, const RunKey& b);
    // The same problem but for the rows: both samples of one head's rows, `b`'s within `a`'s.
    static bool rows_within(const RunKey& a, const RunKey& b);
    struct Run {
        RunKey key;
        std::vector<std::uint32_t> q, k, v;
        std::shared_ptr<const ForwardResult> result;
        std::uint64_t bytes() const;
    };
    static std::shared_ptr<const ForwardResult> slice(const Run& kept, const AttentionShape& shape,
                                                      const AttentionOperands& in, std::uint64_t block_m);
    static RunKey run_key(const AttentionRecipe& recipe, const AttentionShape& shape, const ForwardOptions& options);
    void make_room(std::uint64_t bytes);

    struct Entry {
        const Format* input;
        Product product;
        const MmaModel* model;  // null for the float64 product
        std::uint64_t heads, n_q, n_kv, d;
        bool causal;
        AttentionShape shape;  // for its sampled rows
        std::vector<std::uint32_t> q, k;
        std::shared_ptr<const std::vector<std::uint32_t>> s;
        std::uint64_t bytes() const { return 4 * (q.size() + k.size() + s->size()); }
    };
    std::list<Entry> entries_;
    std::list<Run> runs_;
    std::uint64_t max_bytes_, computed_ = 0, reused_ = 0, forwards_reused_ = 0, forwards_sliced_ = 0;
    std::mutex mutex_;
};

}  // namespace roundscope::emu
