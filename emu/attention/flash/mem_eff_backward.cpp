#include "emu/attention/flash/mem_eff_backward.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "lib/error.hpp"

namespace roundscope::emu {

MemEffBackwardPlan mem_eff_backward_plan(const AttentionRecipe& r, std::uint64_t heads, std::uint64_t n_q,
                                         std::uint64_t n_kv, std::uint64_t d, bool causal, Alignment alignment) {
    // dispatch_cutlassB on sm_90, the first kernel whose kMaxK holds D: fmha_cutlassB_*_64x64_k64 up
    // to 64 (k32 below 32: the same tiles); the 128 x 128 kernels above are not modelled
    if (d > 64)
        throw Error(
            fmt::format("recipe '{}': the memory-efficient backward is modelled for D <= 64 (its 64 x 64 "
                        "kernels); D {} runs another (not captured)",
                        r.name, d));
    MemEffBackwardPlan plan;
    plan.block_i = plan.block_j = 64;
    plan.delta_threads = 2;  // 128 threads over 64 rows
    const auto bi = static_cast<std::uint64_t>(plan.block_i), bj = static_cast<std::uint64_t>(plan.block_j);
    const std::uint64_t key_blocks = (n_kv + bj - 1) / bj, query_blocks = (n_q + bi - 1) / bi;
    // attention_backward.cu's heuristic: one split a key block, unless the grid (one block a head)
    // is already large and the keys few
    plan.splits = static_cast<int>(key_blocks);
    if (heads >= 256 && n_kv <= 2 * bj) plan.splits = 1;
    // getQueryStart: under the causal mask the query block of the first query that sees the key
    // block's first key (from the top left: that key's own index; from the bottom right: it less
    // n_kv - n_q, at least 0), none where that is past the last query; without it, with split
    // keys, split s starts at query block s (kBlockSizeI s mod the padded queries) and wraps
    plan.queries_of_key_block.resize(key_blocks);
    for (std::uint64_t j = 0; j < key_blocks; ++j) {
        auto& order = plan.queries_of_key_block[j];
        const std::uint64_t key_start = j * bj;
        std::uint64_t first_query = key_start;
        if (alignment == Alignment::bottom_right) first_query = key_start + n_q >= n_kv ? key_start + n_q - n_kv : 0;
        if (causal && first_query >= n_q) continue;  // no query sees the block: dK and dV stay 0
        const std::uint64_t first = causal ? first_query / bi : 0;
        const std::uint64_t shift =
            !causal && plan.splits > 1 ? (j % static_cast<std::uint64_t>(plan.splits)) % query_blocks : 0;
        for (std::uint64_t step = 0; step < query_blocks - first; ++step)
            order.push_back(first + (shift + step) % (query_blocks - first));
    }
    // dQ: each split reaches a query block after as many steps as precede it in its own order; the
    // one there first takes the lock first (ties: the lower key block). One split: key order.
    plan.key_blocks_of_query.resize(query_blocks);
    for (std::uint64_t i = 0; i < query_blocks; ++i) {
        std::vector<std::pair<std::uint64_t, std::uint64_t>> arrivals;  // (step, key block)
        for (std::uint64_t j = 0; j < key_blocks; ++j) {
            const auto& order = plan.queries_of_key_block[j];
            const auto at = std::find(order.begin(), order.end(), i);
            if (at == order.end()) continue;
            const auto step = static_cast<std::uint64_t>(at - order.begin());
            arrivals.emplace_back(plan.splits > 1 ? step : 0, j);
        }
        std::sort(arrivals.begin(), arrivals.end());
        for (const auto& [step, j] : arrivals) plan.key_blocks_of_query[i].push_back(j);
    }
    return plan;
}

std::string mem_eff_dq_note(const MemEffBackwardPlan& plan) {
    if (plan.splits <= 1) return "";
    return fmt::format(
        "dq: PyTorch's memory-efficient backward runs {} key splits, each continuing a query block's float32 dQ in "
        "the order they take its lock, which the GPU does not fix; the recipe takes them in the order they reach "
        "the block, one of the results the GPU can give",
        plan.splits);
}

}  // namespace roundscope::emu
