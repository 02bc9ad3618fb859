#include "emu/attention/flash/run_cache.hpp"

#include <algorithm>

#include "emu/attention/flash/aten_gemv.hpp"
#include "emu/attention/flash/flash_context.hpp"
#include "emu/attention/flash/tile_product.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "lib/parallel.hpp"

namespace roundscope::emu {
namespace {

// Rows computed together: each block's keys run to the last row's visible ones.
constexpr std::uint64_t row_block = 64;

}  // namespace

std::shared_ptr<const std::vector<std::uint32_t>> RunCache::scores(const AttentionRecipe& recipe,
                                                                   const AttentionShape& shape,
                                                                   const AttentionOperands& in, int threads) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const MmaModel* model = recipe.scores.product == Product::model
                                ? &model_for(recipe, *recipe.target.input, *recipe.target.input)
                                : nullptr;
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (*it->input == *recipe.target.input && it->product == recipe.scores.product && it->model == model &&
            it->heads == shape.heads && it->n_q == shape.n_q && it->n_kv == shape.n_kv && it->d == shape.d &&
            it->causal == shape.causal && same_query_rows(it->shape, shape) && same_mask_and_groups(it->shape, shape) &&
            it->q == in.q && it->k == in.k) {
            entries_.splice(entries_.end(), entries_, it);  // the newest now
            ++reused_;
            return entries_.back().s;
        }
    }
    auto all = std::make_shared<std::vector<std::uint32_t>>(shape.heads * shape.n_q * shape.n_kv, 0);
    const detail::TileProduct product(recipe, *recipe.target.input, *recipe.target.input, recipe.scores.product,
                                      aten_packed(recipe, shape));
    const std::uint64_t blocks = (shape.n_q + row_block - 1) / row_block, d = shape.d;
    parallel_for(shape.heads * blocks, 1, threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t task = begin; task < end; ++task) {
            const std::uint64_t head = task / blocks, first = task % blocks * row_block;
            const std::uint64_t rows = std::min(row_block, shape.n_q - first);
            const std::uint64_t keys = visible_keys(shape, first + rows - 1);
            if (keys == 0) continue;
            const std::uint32_t* k = in.k.data() + head / shape.kv_group * shape.n_kv * d;
            const std::vector<std::uint32_t> kt = detail::transposed(k, keys, d, {0, d});  // [d][keys]
            std::vector<std::uint32_t> s(rows * keys, 0);
            const std::uint32_t* q = in.q.data() + (head * shape.n_q + first) * d;
            product.run(q, kt.data(), nullptr, s.data(), rows, keys, d);
            detail::aten_gemv_scores(recipe, shape, q, k, {first, first + rows}, {0, keys}, s);
            for (std::uint64_t r = 0; r < rows; ++r)
                std::copy_n(s.begin() + static_cast<std::ptrdiff_t>(r * keys), keys,
                            all->begin() + static_cast<std::ptrdiff_t>((head * shape.n_q + first + r) * shape.n_kv));
        }
    });
    ++computed_;
    Entry e{recipe.target.input,
            recipe.scores.product,
            model,
            shape.heads,
            shape.n_q,
            shape.n_kv,
            shape.d,
            shape.causal,
            shape,
            in.q,
            in.k,
            std::move(all)};
    make_room(e.bytes());
    entries_.push_back(std::move(e));
    return entries_.back().s;
}

RunCache::RunKey RunCache::run_key(const AttentionRecipe& recipe, const AttentionShape& shape,
                                   const ForwardOptions& options) {
    std::string r(recipe.name);
    for (const auto& [key, value] : recipe_settings(recipe)) r += "\n" + key + "=" + value;
    return {r, shape, options.uncounted_keys, options.row_begin, options.row_end};
}

bool RunCache::same(const RunKey& a, const RunKey& b) {
    const AttentionShape &x = a.shape, &y = b.shape;
    return a.recipe == b.recipe && x.heads == y.heads && x.n_q == y.n_q && x.n_kv == y.n_kv && x.d == y.d &&
           x.d_v == y.d_v && x.causal == y.causal && bits_of(x.scale) == bits_of(y.scale) && same_query_rows(x, y) &&
           same_mask_and_groups(x, y) && a.uncounted_keys == b.uncounted_keys && a.row_begin == b.row_begin &&
           a.row_end == b.row_end;
}

bool RunCache::rows_within(const RunKey& a, const RunKey& b) {
    const AttentionShape &x = a.shape, &y = b.shape;
    constexpr std::uint64_t all = ~std::uint64_t{0};
    if (!x.query_rows || !y.query_rows || x.query_rows_of != y.query_rows_of || x.heads != 1 || y.heads != 1)
        return false;
    if (a.row_begin != 0 || a.row_end != all || b.row_begin != 0 || b.row_end != all) return false;
    return a.recipe == b.recipe && x.n_kv == y.n_kv && x.d == y.d && x.d_v == y.d_v && x.causal == y.causal &&
           bits_of(x.scale) == bits_of(y.scale) && same_mask_and_groups(x, y) && a.uncounted_keys == b.uncounted_keys &&
           std::includes(x.query_rows->begin(), x.query_rows->end(), y.query_rows->begin(), y.query_rows->end());
}

std::shared_ptr<const ForwardResult> RunCache::slice(const Run& kept, const AttentionShape& shape,
                                                     const AttentionOperands& in, std::uint64_t block_m) {
    const ForwardResult& from = *kept.result;
    const std::vector<std::uint64_t>&have = *kept.key.shape.query_rows, &want = *shape.query_rows;
    const std::uint64_t d = shape.d, dv = shape.d_v;
    if (from.row_counts.size() != have.size() || in.k != kept.k || in.v != kept.v) return nullptr;
    auto out = std::make_shared<ForwardResult>();
    out->o.resize(want.size() * dv), out->o_f32.resize(want.size() * dv);
    out->lse.resize(want.size()), out->lse_log2.resize(want.size()), out->row_counts.resize(want.size());
    std::uint64_t j = 0;  // the kept row of row i: both lists ascending
    for (std::uint64_t i = 0; i < want.size(); ++i) {
        while (have[j] != want[i]) ++j;
        if (!std::equal(in.q.begin() + static_cast<std::ptrdiff_t>(i * d),
                        in.q.begin() + static_cast<std::ptrdiff_t>((i + 1) * d),
                        kept.q.begin() + static_cast<std::ptrdiff_t>(j * d)))
            return nullptr;  // another query at that position
        std::copy_n(from.o.begin() + static_cast<std::ptrdiff_t>(j * dv), dv,
                    out->o.begin() + static_cast<std::ptrdiff_t>(i * dv));
        std::copy_n(from.o_f32.begin() + static_cast<std::ptrdiff_t>(j * dv), dv,
                    out->o_f32.begin() + static_cast<std::ptrdiff_t>(i * dv));
        out->lse[i] = from.lse[j], out->lse_log2[i] = from.lse_log2[j], out->row_counts[i] = from.row_counts[j];
    }
    sum_row_counts(*out, 1, want.size(), block_m);
    return out;
}

std::uint64_t RunCache::Run::bytes() const {
    const ForwardResult& f = *result;
    return 4 * (q.size() + k.size() + v.size() + f.o.size() + f.o_f32.size() + f.lse.size() + f.lse_log2.size()) +
           sizeof(ForwardCounts) * f.row_counts.size();
}

std::shared_ptr<const ForwardResult> RunCache::forward(const AttentionRecipe& recipe, const AttentionShape& shape,
                                                       const AttentionOperands& in, const ForwardOptions& options,
                                                       std::uint64_t block_m) {
    const RunKey key = run_key(recipe, shape, options);
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = runs_.begin(); it != runs_.end(); ++it) {
        if (same(it->key, key) && it->q == in.q && it->k == in.k && it->v == in.v) {
            runs_.splice(runs_.end(), runs_, it);
            ++forwards_reused_;
            return runs_.back().result;
        }
    }
    for (auto it = runs_.begin(); it != runs_.end(); ++it) {
        if (!rows_within(it->key, key)) continue;
        if (std::shared_ptr<const ForwardResult> rows = slice(*it, shape, in, block_m)) {
            ++forwards_reused_, ++forwards_sliced_;
            return rows;
        }
    }
    return nullptr;
}

void RunCache::keep_forward(const AttentionRecipe& recipe, const AttentionShape& shape, const AttentionOperands& in,
                            const ForwardOptions& options, const ForwardResult& result) {
    Run run{run_key(recipe, shape, options), in.q, in.k, in.v, std::make_shared<const ForwardResult>(result)};
    const std::lock_guard<std::mutex> lock(mutex_);
    make_room(run.bytes());
    runs_.push_back(std::move(run));
}

void RunCache::make_room(std::uint64_t bytes) {
    std::uint64_t held = bytes;
    for (const Entry& x : entries_) held += x.bytes();
    for (const Run& x : runs_) held += x.bytes();
    while (held > max_bytes_ && !runs_.empty()) held -= runs_.front().bytes(), runs_.pop_front();
    while (held > max_bytes_ && !entries_.empty()) held -= entries_.front().bytes(), entries_.pop_front();
}

}  // namespace roundscope::emu
