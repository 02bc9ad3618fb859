#include "analysis/truth_cache.hpp"

#include <bit>

#include "analysis/attention_run.hpp"

namespace roundscope::analysis {
namespace {

bool same_operands(const emu::AttentionOperands& a, const emu::AttentionOperands& b, bool backward) {
    return a.q == b.q && a.k == b.k && a.v == b.v && (!backward || a.d_o == b.d_o);
}

}  // namespace

const AttentionTruth& TruthCache::truth(const emu::AttentionInputs& in, const emu::AttentionOperands& held,
                                        const emu::Format& f, const TruthOptions& options) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry& e : entries_) {
        // The intermediates (S, P) are not kept: a request for them is computed afresh.
        if (e.source == &in && e.format == f && e.causal == options.causal &&
            std::bit_cast<std::uint64_t>(e.scale) == std::bit_cast<std::uint64_t>(options.scale) &&
            (e.backward || !options.backward) && (e.gradients || !options.backward || !options.gradients) &&
            !options.intermediates && same_operands(e.held, held, options.backward)) {
            ++reused_;
            return e.truth;
        }
    }
    TruthOptions o = options;
    o.intermediates = false;
    entries_.push_back({&in, held, f, options.causal, options.backward, options.backward && options.gradients,
                        options.scale, attention_truth(inputs_as_held(in, held, f), o)});
    return entries_.back().truth;
}

AttentionTruth shared_truth(TruthCache* cache, const emu::AttentionInputs& in, const emu::AttentionOperands& held,
                            const emu::Format& f, const TruthOptions& options) {
    if (cache == nullptr || options.intermediates) return attention_truth(inputs_as_held(in, held, f), options);
    return cache->truth(in, held, f, options);
}

}  // namespace roundscope::analysis
