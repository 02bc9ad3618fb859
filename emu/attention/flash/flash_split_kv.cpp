#include "emu/attention/flash/flash_split_kv.hpp"

#include <algorithm>
#include <limits>

#include "emu/attention/math/libdevice_math.hpp"
#include "emu/numbers/f32_arith.hpp"

namespace roundscope::emu {
namespace {

namespace a = f32_arith;

// The combine kernel's lanes (flash_fwd_launch_template.h, combine_attn_seqk_parallel): 128
// threads, 4, 8 or 16 query rows a block (D a multiple of 128, of 64, other), the splits
// padded to a power of two; each query row's splits lie in `width` lanes, split l * width + lane
// in lane `lane`, `per_lane` of them a lane.
struct CombineLanes {
    int width, per_lane;
};

CombineLanes combine_lanes(std::uint64_t d, int splits) {
    const int block_m = d % 128 == 0 ? 4 : d % 64 == 0 ? 8 : 16;
    int max_splits = 2;
    while (max_splits < splits) max_splits *= 2;
    const int width = std::min(128 / block_m, max_splits);
    return {width, (max_splits * block_m + 127) / 128};
}

// Allreduce over the lanes: x = op(x, shfl_xor(x, w / 2)), then w / 4, ... 1; each step gives
// both lanes of a pair the same bits (op(a, b) = op(b, a)), so lane 0 holds the result.
template <class Op>
float butterfly(std::vector<float> x, Op op) {
    for (std::size_t offset = x.size() / 2; offset >= 1; offset /= 2) {
        std::vector<float> next(x.size());
        for (std::size_t lane = 0; lane < x.size(); ++lane) next[lane] = op(x[lane], x[lane ^ offset]);
        x = std::move(next);
    }
    return x[0];
}

}  // namespace

SplitKvTiles split_kv_tiles(std::uint64_t d) { return {64, d <= 64 ? 256 : d <= 128 ? 128 : 64}; }

Span split_keys(std::uint64_t n_kv, int block_n, int splits, int s) {
    const auto bn = static_cast<std::uint64_t>(block_n);
    const std::uint64_t tiles = (n_kv + bn - 1) / bn;
    const std::uint64_t per_split =
        (tiles + static_cast<std::uint64_t>(splits) - 1) / static_cast<std::uint64_t>(splits);
    const std::uint64_t begin = std::min(n_kv, static_cast<std::uint64_t>(s) * per_split * bn);
    return {begin, std::min(n_kv, begin + per_split * bn)};
}

ForwardResult combine_splits(const FlashContext& ctx, const std::vector<ForwardResult>& splits) {
    const AttentionShape& sh = ctx.shape;
    const std::uint64_t rows = sh.heads * sh.n_q, dv = sh.d_v;
    const auto n = static_cast<int>(splits.size());
    const CombineLanes lanes = combine_lanes(sh.d, n);
    const float minus_inf = -std::numeric_limits<float>::infinity(), inf = std::numeric_limits<float>::infinity();
    ForwardResult out;
    out.o.assign(rows * dv, 0), out.o_f32.assign(rows * dv, 0.0f);
    out.lse.assign(rows, 0.0f), out.lse_log2.assign(rows, 0.0f);
    std::vector<float> lse(static_cast<std::size_t>(lanes.width * lanes.per_lane));
    for (std::uint64_t i = 0; i < rows; ++i) {
        for (std::size_t s = 0; s < lse.size(); ++s) lse[s] = s < splits.size() ? splits[s].lse[i] : minus_inf;
        // Each lane's splits l * width + lane in turn, then across the lanes.
        auto per_lane = [&](auto term, auto op) {
            std::vector<float> x(static_cast<std::size_t>(lanes.width));
            for (int lane = 0; lane < lanes.width; ++lane) {
                x[lane] = term(lse[lane]);
                for (int l = 1; l < lanes.per_lane; ++l) x[lane] = op(x[lane], term(lse[l * lanes.width + lane]));
            }
            return x;
        };
        const auto max = [](float p, float q) { return std::fmax(p, q); };
        const auto add = [](float p, float q) { return a::add(p, q); };
        float lse_max = butterfly(per_lane([](float x) { return x; }, max), max);
        if (lse_max == minus_inf) lse_max = 0.0f;  // every split empty
        const float sum = butterfly(per_lane([&](float x) { return libdevice_expf(a::sub(x, lse_max)); }, add), add);
        const float lse_logsum = sum == 0.0f || sum != sum ? inf : a::add(libdevice_logf(sum), lse_max);
        out.lse[i] = lse_logsum;
        out.lse_log2[i] = a::mul(lse_logsum, steps::log2e);
        for (std::uint64_t c = 0; c < dv; ++c) {
            float acc = 0.0f;
            for (std::size_t s = 0; s < splits.size(); ++s)
                acc = a::fma(libdevice_expf(a::sub(lse[s], lse_logsum)), splits[s].o_f32[i * dv + c], acc);
            out.o_f32[i * dv + c] = acc;
            out.o[i * dv + c] = steps::saturating_cast(acc, *ctx.recipe.output.format);
        }
    }
    out.head_counts.assign(sh.heads, ForwardCounts{});
    for (const ForwardResult& s : splits) {
        steps::add_counts(out.counts, s.counts);
        for (std::uint64_t h = 0; h < sh.heads && h < s.head_counts.size(); ++h)
            steps::add_counts(out.head_counts[h], s.head_counts[h]);
    }
    return out;
}

}  // namespace roundscope::emu
