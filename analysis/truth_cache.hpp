#pragma once
// The ground truth shared by the analyses of one attention input (the report runs every
// analysis on each head): each truth is computed once per distinct held inputs and options and
// handed to every analysis that asks for it again. An entry is found only for the same source
// inputs (by address: the cache lives no longer than they do), bit-identical held operands in the
// same format (the inputs as the recipe's kernel holds them), the same causal mask and scale, and a backward pass
// (with dQ, and with dK and dV) when one is asked for: a hit is the very truth a fresh computation would give.
#include <list>
#include <mutex>
#include <optional>

#include "analysis/truth/attention_truth.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"

namespace roundscope::analysis {

class TruthCache {
public:
    /// `rows_from`: a cache of a larger sample of the same head's query rows (alive as long as
    /// this one, its inputs too), from whose truths a sample's is taken row by row: every
    /// output of a row but dK and dV (which are not asked of a sample) is that row's own.
    explicit TruthCache(TruthCache* rows_from = nullptr) : rows_from_(rows_from) {}

    /// The truth of `in` as held in format `f` (the operands `held`), computed on first use.
    const AttentionTruth& truth(const emu::AttentionInputs& in, const emu::AttentionOperands& held,
                                const emu::Format& f, const TruthOptions& options);
    /// Keeps `known`, which the caller vouches is the truth of `in` as held in `f` (as truth()
    /// would compute it, e.g. rows of a larger truth), for the requests after; returns the kept one.
    const AttentionTruth& put(const emu::AttentionInputs& in, const emu::AttentionOperands& held, const emu::Format& f,
                              const TruthOptions& options, AttentionTruth known);
    std::size_t computed() const { return computed_; }  // truths computed
    std::size_t reused() const { return reused_; }      // requests answered from the cache
    std::size_t sliced() const { return sliced_; }      // truths taken from rows_from's

private:
    struct Entry {
        const emu::AttentionInputs* source;
        emu::AttentionShape shape;  // its rows, mask and groups (for a sample's rows)
        emu::AttentionOperands held;
        emu::Format format;
        bool causal, backward, gradients, key_gradients;
        double scale;
        AttentionTruth truth;
    };
    // Adds an entry (the mutex held).
    const AttentionTruth& keep(const emu::AttentionInputs& in, const emu::AttentionOperands& held, const emu::Format& f,
                               const TruthOptions& options, AttentionTruth truth);
    // The truth of the sample `in` from the rows of one of this cache's samples, if one holds them.
    std::optional<AttentionTruth> rows_of(const emu::AttentionInputs& in, const emu::AttentionOperands& held,
                                          const emu::Format& f, const TruthOptions& options);

    std::list<Entry> entries_;  // stable addresses: the references handed out stay valid
    TruthCache* rows_from_;
    std::size_t computed_ = 0, reused_ = 0, sliced_ = 0;
    std::mutex mutex_;
};

/// Query head `head`'s outputs of `t` (a truth of several heads): O, LSE, and delta and dQ
/// where `t` has them; no dK or dV (which sum over a key-value head's group).
AttentionTruth query_head_of(const AttentionTruth& t, std::uint64_t head);

/// The truth through `cache` when there is one, else computed here.
AttentionTruth shared_truth(TruthCache* cache, const emu::AttentionInputs& in, const emu::AttentionOperands& held,
                            const emu::Format& f, const TruthOptions& options);

}  // namespace roundscope::analysis
