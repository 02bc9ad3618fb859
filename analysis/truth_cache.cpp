#include "analysis/truth_cache.hpp"

#include <algorithm>
#include <bit>

#include "analysis/attention_run.hpp"
#include "emu/attention/flash/attention_operands.hpp"

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
            (e.key_gradients || !options.backward || !options.gradients || !options.key_gradients) &&
            !options.intermediates && same_operands(e.held, held, options.backward)) {
            ++reused_;
            return e.truth;
        }
    }
    TruthOptions o = options;
    o.intermediates = false;
    std::optional<AttentionTruth> rows = rows_from_ ? rows_from_->rows_of(in, held, f, options) : std::nullopt;
    if (rows) {
        ++sliced_;
    } else {
        ++computed_;
        rows = attention_truth(inputs_as_held(in, held, f), o);
    }
    return keep(in, held, f, options, std::move(*rows));
}

const AttentionTruth& TruthCache::put(const emu::AttentionInputs& in, const emu::AttentionOperands& held,
                                      const emu::Format& f, const TruthOptions& options, AttentionTruth known) {
    std::lock_guard<std::mutex> lock(mutex_);
    return keep(in, held, f, options, std::move(known));
}

const AttentionTruth& TruthCache::keep(const emu::AttentionInputs& in, const emu::AttentionOperands& held,
                                       const emu::Format& f, const TruthOptions& options, AttentionTruth truth) {
    entries_.push_back({&in, emu::attention_shape_of(in, options.causal, options.scale), held, f, options.causal,
                        options.backward, options.backward && options.gradients,
                        options.backward && options.gradients && options.key_gradients, options.scale,
                        std::move(truth)});
    return entries_.back().truth;
}

AttentionTruth query_head_of(const AttentionTruth& t, std::uint64_t head) {
    AttentionTruth h;
    h.heads = 1, h.kv_heads = 1, h.n_q = t.n_q, h.n_kv = t.n_kv, h.d = t.d, h.d_v = t.d_v;
    h.causal = t.causal, h.scale = t.scale, h.max_precision_used = t.max_precision_used;
    h.fast_heads = t.fast_heads == t.heads ? 1 : 0;
    auto take = [head](const std::vector<double>& x, std::vector<double>& to, std::uint64_t per) {
        if (x.empty()) return;
        to.assign(x.begin() + static_cast<std::ptrdiff_t>(head * per),
                  x.begin() + static_cast<std::ptrdiff_t>((head + 1) * per));
    };
    take(t.o, h.o, t.n_q * t.d_v), take(t.lse, h.lse, t.n_q), take(t.delta, h.delta, t.n_q),
        take(t.dq, h.dq, t.n_q * t.d);
    return h;
}

std::optional<AttentionTruth> TruthCache::rows_of(const emu::AttentionInputs& in, const emu::AttentionOperands& held,
                                                  const emu::Format& f, const TruthOptions& options) {
    if (!in.query_rows || in.batch * in.heads != 1 || options.intermediates || (options.backward && options.gradients))
        return std::nullopt;
    const emu::AttentionShape want = emu::attention_shape_of(in, options.causal, options.scale);
    const std::vector<std::uint64_t>& rows = *in.query_rows;
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry& e : entries_) {
        const std::vector<std::uint64_t>* have = e.shape.query_rows.get();
        if (!have || e.shape.query_rows_of != want.query_rows_of || e.shape.heads != 1 || !(e.format == f) ||
            e.causal != options.causal ||
            std::bit_cast<std::uint64_t>(e.scale) != std::bit_cast<std::uint64_t>(options.scale) ||
            (options.backward && !e.backward) || !emu::same_mask_and_groups(e.shape, want) ||
            e.shape.n_kv != want.n_kv || e.shape.d != want.d || e.shape.d_v != want.d_v || e.held.k != held.k ||
            e.held.v != held.v || !e.truth.dk.empty() || !e.truth.dv.empty() ||
            !std::includes(have->begin(), have->end(), rows.begin(), rows.end()))
            continue;
        const AttentionTruth& from = e.truth;
        AttentionTruth t;
        t.heads = 1, t.n_q = rows.size(), t.n_kv = from.n_kv, t.d = from.d, t.d_v = from.d_v;
        t.causal = from.causal, t.scale = from.scale, t.kv_heads = from.kv_heads;
        const std::uint64_t d = want.d, dv = want.d_v;
        // Row i's part of x (per values a row) from kept row j.
        auto take = [](const std::vector<double>& x, std::vector<double>& to, std::uint64_t j, std::uint64_t per) {
            to.insert(to.end(), x.begin() + static_cast<std::ptrdiff_t>(j * per),
                      x.begin() + static_cast<std::ptrdiff_t>((j + 1) * per));
        };
        bool same = true;
        for (std::uint64_t i = 0, j = 0; i < rows.size() && same; ++i) {
            while ((*have)[j] != rows[i]) ++j;
            same = std::equal(held.q.begin() + static_cast<std::ptrdiff_t>(i * d),
                              held.q.begin() + static_cast<std::ptrdiff_t>((i + 1) * d),
                              e.held.q.begin() + static_cast<std::ptrdiff_t>(j * d)) &&
                   (!options.backward || std::equal(held.d_o.begin() + static_cast<std::ptrdiff_t>(i * dv),
                                                    held.d_o.begin() + static_cast<std::ptrdiff_t>((i + 1) * dv),
                                                    e.held.d_o.begin() + static_cast<std::ptrdiff_t>(j * dv)));
            take(from.o, t.o, j, dv), take(from.lse, t.lse, j, 1);
            if (options.backward) take(from.delta, t.delta, j, 1);
            if (options.backward && !from.dq.empty()) take(from.dq, t.dq, j, d);
        }
        if (same) return t;  // (its statistics, which only the truth command reads, are not a slice's)
    }
    return std::nullopt;
}

AttentionTruth shared_truth(TruthCache* cache, const emu::AttentionInputs& in, const emu::AttentionOperands& held,
                            const emu::Format& f, const TruthOptions& options) {
    if (cache == nullptr || options.intermediates) return attention_truth(inputs_as_held(in, held, f), options);
    return cache->truth(in, held, f, options);
}

}  // namespace roundscope::analysis
