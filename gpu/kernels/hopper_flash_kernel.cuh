#pragma once
// The FlashAttention-3-style BF16 forward kernel for Hopper (sm_90a), whose arithmetic is the
// recipe h100-bf16 (emu/attention/recipe/recipe_presets.cpp): one thread block per 128 query rows of
// one head; a producer warpgroup, whose one thread issues TMA loads of Q once and of K and V
// into a two-stage ring, gives its registers to the consumers (setmaxnreg: 24 and 240 of them);
// two consumer warpgroups of 64 rows each compute S = Q K^T by wgmma (both operands in shared
// memory), the online softmax on S's accumulator fragments, and O += P V by wgmma with P from
// registers and V read MN-major; the epilogue writes O through shared memory with a TMA store.
//
// Stage s of the ring is guarded by four mbarriers: k_full / v_full (the producer's arrival
// with the tile's bytes, completed as the copies land) and k_empty / v_empty (every consumer
// thread's arrival once its wgmma has read the tile). K and V have their own barriers so that S
// can start while V is in flight.
//
// Bit for bit the emulator's h100-bf16: the same tiles in the same order (the whole 128-row
// block's choice of tiles, as emu/attention/flash/flash_forward.cpp makes it), the products by the
// wgmma model over k16 steps (all 8 of a tile for P V: pv_depth=tile), and the scalar steps
// from emu/attention/softmax/attention_steps.hpp. A row's statistics are spread over the four lanes that hold its
// columns: its raw maximum is reduced by shuffles (a maximum in any order is the same value; only a zero's sign could
// differ, which no output reads), the scaled maximum taken as RN(raw max x c) (rounding is monotone and c > 0, so it is
// the maximum of RN(s c)), and its sum kept per lane, as row_sum=quad-ffma states.
#include <cstdint>
#include <cstring>

#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/numbers/round.hpp"
#include "gpu/primitives/convert.hpp"
#include "gpu/primitives/register_budget.hpp"
#include "gpu/primitives/sync.hpp"
#include "gpu/primitives/tma.hpp"
#include "gpu/primitives/warp.hpp"
#include "gpu/primitives/wgmma.hpp"

namespace roundscope::gpu::hopper {

inline constexpr int block_m = 128, block_n = 128;      // query rows and keys of a tile
inline constexpr int consumer_threads = 256;            // two warpgroups
inline constexpr int threads = consumer_threads + 128;  // and the producer warpgroup
// setmaxnreg's split of the 168 registers each of 384 threads starts with (65536 / 384, rounded
// down to a multiple of 8): 128 x 24 + 256 x 240 = 384 x 168
inline constexpr int producer_registers = 24, consumer_registers = 240;
inline constexpr int panel_cols = 64;                                   // a 128-byte swizzle span of BF16
inline constexpr std::uint32_t panel_bytes = block_n * panel_cols * 2;  // a 128-row panel: 16 KiB

struct ForwardParams {
    TmaMap q_map, k_map, v_map, o_map;  // [heads][n][d] BF16: boxes 64 columns x 128 rows (O: 64 rows)
    float *lse, *lse2;                  // [heads][n_q]
    float* o_f32;                       // [heads][n_q][d]: O before its cast, or null
    std::uint64_t n_q, n_kv;
    bool causal, reverse;
    emu::steps::OnlineSoftmax softmax;  // its P format BF16, as O's (the host checks)
};

/// The shared memory of a block for head dimension D: Q, the K and V rings, the barriers.
template <int D>
struct SharedLayout {
    static constexpr int panels = D / panel_cols;
    static constexpr std::uint32_t tile = panels * panel_bytes;  // 128 rows x D
    static constexpr std::uint32_t q = 0, k = tile, v = 3 * tile, barriers = 5 * tile;
    // and up to 1 KiB to align the tiles to the 128-byte swizzle's period (dynamic shared memory
    // is only 16-byte aligned on the GPU)
    static constexpr std::uint32_t bytes = barriers + 9 * 8 + 1024;
};

namespace detail {

namespace a = emu::f32_arith;
namespace steps = emu::steps;

struct Barriers {
    std::uint64_t q_full, k_full[2], v_full[2], k_empty[2], v_empty[2];
};

// The KV tiles of a block in the recipe's order, skipping those no row of the block sees.
struct TileWalk {
    std::uint64_t tiles, row_end, n_q, n_kv;
    bool causal, reverse;
    ROUNDSCOPE_DEVICE std::uint64_t key0(std::uint64_t step) const {
        return (reverse ? tiles - 1 - step : step) * static_cast<std::uint64_t>(block_n);
    }
    ROUNDSCOPE_DEVICE bool skipped(std::uint64_t step) const {
        return steps::tile_masked(row_end, key0(step), n_q, n_kv, causal);
    }
};

// The producer: Q once, then each tile's K and V into stage i % 2 once its previous tile
// there has been released.
template <int D>
ROUNDSCOPE_DEVICE void produce(const ForwardParams& p, const TileWalk& walk, std::byte* shared, Barriers& bar,
                               std::int32_t row0, std::int32_t head) {
    using L = SharedLayout<D>;
    mbarrier_arrive(&bar.q_full, L::tile);
    for (int c = 0; c < L::panels; ++c)
        tma_load(&p.q_map, shared + L::q + c * panel_bytes, c * panel_cols, row0, head, &bar.q_full);
    std::uint32_t i = 0;
    for (std::uint64_t step = 0; step < walk.tiles; ++step) {
        if (walk.skipped(step)) continue;
        const auto key0 = static_cast<std::int32_t>(walk.key0(step));
        const std::uint32_t s = i % 2;
        if (i >= 2) mbarrier_wait_parity(&bar.k_empty[s], (i / 2 - 1) % 2);
        mbarrier_arrive(&bar.k_full[s], L::tile);
        for (int c = 0; c < L::panels; ++c)
            tma_load(&p.k_map, shared + L::k + s * L::tile + c * panel_bytes, c * panel_cols, key0, head,
                     &bar.k_full[s]);
        if (i >= 2) mbarrier_wait_parity(&bar.v_empty[s], (i / 2 - 1) % 2);
        mbarrier_arrive(&bar.v_full[s], L::tile);
        for (int c = 0; c < L::panels; ++c)
            tma_load(&p.v_map, shared + L::v + s * L::tile + c * panel_bytes, c * panel_cols, key0, head,
                     &bar.v_full[s]);
        ++i;
    }
}

// A consumer thread's two rows (its warp's lane / 4 and lane / 4 + 8): the online state.
struct RowState {
    float m = steps::minus_infinity(), m_raw = steps::minus_infinity();
    float lane_sum = 0;  // this lane's share of l (row_sum=quad-ffma)
};

ROUNDSCOPE_DEVICE inline float quad_max(float x) {
    x = a::max(x, shfl_xor(x, 1));
    return a::max(x, shfl_xor(x, 2));
}

// K-major descriptor of a 128-byte-swizzled tile of rows x D (panels of 64 columns) at k16 step kk.
ROUNDSCOPE_DEVICE inline std::uint64_t k_major_step(std::uint32_t tile, int kk) {
    return encode_descriptor(
        {tile + static_cast<std::uint32_t>(kk / 4) * panel_bytes + static_cast<std::uint32_t>(kk % 4) * 32, 16, 1024, 0,
         Swizzle::b128});
}

// MN-major descriptor of V's keys 16 kk .. 16 kk + 15: 128-byte rows of 64 columns, panels LBO apart.
ROUNDSCOPE_DEVICE inline std::uint64_t mn_major_step(std::uint32_t tile, int kk) {
    return encode_descriptor({tile + static_cast<std::uint32_t>(kk) * 16 * 128, panel_bytes, 1024, 0, Swizzle::b128});
}

// O += P V over the tile's 8 k16 steps, a partial tile's too (pv_depth=tile: the keys past its
// end are zeros in P and in V), unrolled so that P and O stay in registers and the wgmmas issue
// back to back.
template <int D>
ROUNDSCOPE_DEVICE void pv_product(float (&o)[D / 2], const std::uint32_t (&p)[block_n / 4], std::uint32_t v_tile) {
    ROUNDSCOPE_UNROLL
    for (int kk = 0; kk < block_n / 16; ++kk) {
        const std::uint32_t a_frag[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
        wgmma_bf16_rs<D, Major::mn>(o, a_frag, mn_major_step(v_tile, kk), true);
    }
}

// What a consumer thread carries from tile to tile: its two rows (its warp's lane / 4 and lane / 4 + 8),
// their online state, its share of O, and the ring's count of tiles consumed.
template <int D>
struct ConsumerState {
    std::uint64_t rows[2];
    RowState st[2];
    float o[D / 2];
    std::uint32_t i = 0;
};

// One tile of a consumer warpgroup: S = Q K^T, the online softmax, O += P V. Masked: the tile
// holds keys some row of the block does not see (a partial last tile, the causal diagonal);
// otherwise every score is taken as it is, without the mask's compare and select.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg, bool Masked>
ROUNDSCOPE_DEVICE void consume_tile(const ForwardParams& p, const TileWalk& walk, Barriers& bar, std::uint32_t base,
                                    std::uint32_t q_rows, ConsumerState<D>& c, std::uint64_t step) {
    using L = SharedLayout<D>;
    const unsigned lane = threadIdx.x % 32;
    const steps::OnlineSoftmax& f = p.softmax;
    const std::uint64_t(&rows)[2] = c.rows;
    RowState(&st)[2] = c.st;
    float(&o)[D / 2] = c.o;
    const std::uint32_t i = c.i;
    const std::uint64_t key0 = walk.key0(step);
    const std::uint64_t keys = p.n_kv - key0 < block_n ? p.n_kv - key0 : block_n;
    const std::uint32_t s = i % 2, phase = i / 2 % 2;
    // S = Q K^T over D / 16 chained steps
    float acc[block_n / 2];
    mbarrier_wait_parity(&bar.k_full[s], phase);
    wgmma_fence();
    ROUNDSCOPE_UNROLL
    for (int kk = 0; kk < D / 16; ++kk)
        wgmma_bf16_ss<block_n>(acc, k_major_step(q_rows, kk), k_major_step(base + L::k + s * L::tile, kk), kk > 0);
    wgmma_commit_group();
    wgmma_wait_group<0>();
    mbarrier_arrive(&bar.k_empty[s]);
    // the online softmax: acc[4 j + e] is row rows[e / 2], key key0 + 8 j + 2 (lane % 4) + e % 2
    float factor[2];
    std::uint32_t p_pairs[block_n / 4];  // [2 j + r]: P of row r at keys 8 j + 2 (lane % 4) and + 1, BF16
    ROUNDSCOPE_UNROLL
    for (int r = 0; r < 2; ++r) {
        const std::uint64_t visible = steps::visible_keys(rows[r], p.n_q, p.n_kv, p.causal);
        const int in_tile = static_cast<int>(visible <= key0 ? 0 : (visible - key0 < keys ? visible - key0 : keys));
        // a masked key's score taken as -inf: P-bar = exp2(-inf) = +0, as the row step's
        // masked keys, without a branch around each exp2; a whole tile takes its scores as they are
        float score[block_n / 4];
        ROUNDSCOPE_UNROLL
        for (int j = 0; j < block_n / 8; ++j) {
            ROUNDSCOPE_UNROLL
            for (int e = 0; e < 2; ++e) {
                const bool seen = !Masked || 8 * j + 2 * static_cast<int>(lane % 4) + e < in_tile;
                score[2 * j + e] = seen ? acc[4 * j + 2 * r + e] : steps::minus_infinity();
            }
        }
        float raw = steps::minus_infinity();
        ROUNDSCOPE_UNROLL
        for (int q = 0; q < block_n / 4; ++q) raw = a::max(raw, score[q]);
        raw = quad_max(raw);
        const float m_new = a::max(st[r].m, a::mul(raw, f.scale_log2)), m_raw_new = a::max(st[r].m_raw, raw);
        factor[r] = f.rescale_arg == emu::RescaleArg::raw
                        ? steps::rescale_raw(st[r].m_raw, m_raw_new, f.scale_log2, Exp2)
                        : steps::rescale(st[r].m, m_new, Exp2);
        ROUNDSCOPE_UNROLL
        for (int j = 0; j < block_n / 8; ++j) {
            float pb[2];
            ROUNDSCOPE_UNROLL
            for (int e = 0; e < 2; ++e) {
                pb[e] = steps::exp2(steps::exp2_argument(score[2 * j + e], f.scale_log2, steps::usable_max(m_new), Arg),
                                    Exp2);
                // the lane's first key of the tile carries the rescale (one FFMA)
                st[r].lane_sum =
                    j == 0 && e == 0 ? a::fma(st[r].lane_sum, factor[r], pb[e]) : a::add(st[r].lane_sum, pb[e]);
            }
            // steps::cast_p into BF16, the pair by one cvt.rn.satfinite.bf16x2.f32
            p_pairs[2 * j + r] = bf16x2_rn_satfinite(a::mul(pb[0], f.p_scale), a::mul(pb[1], f.p_scale));
        }
        st[r].m = m_new, st[r].m_raw = m_raw_new;
    }
    ROUNDSCOPE_UNROLL
    for (int x = 0; x < D / 2; ++x) o[x] = a::mul(o[x], factor[x % 4 / 2]);
    // O += P V: P's accumulator fragment is wgmma's A fragment (keys 16 kk .. 16 kk + 15)
    mbarrier_wait_parity(&bar.v_full[s], phase);
    wgmma_fence();
    pv_product<D>(o, p_pairs, base + L::v + s * L::tile);
    wgmma_commit_group();
    wgmma_wait_group<0>();
    mbarrier_arrive(&bar.v_empty[s]);
    ++c.i;
}

// One consumer warpgroup (w = 0, 1): rows row0 + 64 w .. + 63 of the block.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg>
ROUNDSCOPE_DEVICE void consume(const ForwardParams& p, const TileWalk& walk, std::byte* shared, Barriers& bar,
                               std::uint64_t row0, std::uint64_t head) {
    using L = SharedLayout<D>;
    const unsigned t = threadIdx.x % 128, w = threadIdx.x / 128, lane = t % 32;
    const std::uint32_t base = shared_address(shared);
    const std::uint32_t q_rows = base + L::q + w * 64 * 128;  // the warpgroup's rows in each Q panel
    const steps::OnlineSoftmax& f = p.softmax;
    ConsumerState<D> state;
    state.rows[0] = row0 + 64 * w + 16 * (t / 32) + lane / 4, state.rows[1] = state.rows[0] + 8;
    ROUNDSCOPE_UNROLL
    for (int x = 0; x < D / 2; ++x) state.o[x] = 0;
    mbarrier_wait_parity(&bar.q_full, 0);
    // The tiles every row of the block sees whole need no mask. In the walk's order they are one
    // run, the others (a partial last tile, the causal diagonal) before it (reverse) or after it:
    // three loops, so that the run's holds no mask at all.
    const std::uint64_t seen_by_all = steps::visible_keys(row0, p.n_q, p.n_kv, p.causal);
    auto whole = [&](std::uint64_t step) { return walk.key0(step) + block_n <= seen_by_all; };
    std::uint64_t step = 0;
    for (; step < walk.tiles && !whole(step); ++step)
        if (!walk.skipped(step)) consume_tile<D, Exp2, Arg, true>(p, walk, bar, base, q_rows, state, step);
    for (; step < walk.tiles && whole(step); ++step)
        consume_tile<D, Exp2, Arg, false>(p, walk, bar, base, q_rows, state, step);
    for (; step < walk.tiles; ++step)
        if (!walk.skipped(step)) consume_tile<D, Exp2, Arg, true>(p, walk, bar, base, q_rows, state, step);
    const std::uint64_t(&rows)[2] = state.rows;
    const RowState(&st)[2] = state.st;
    const float(&o)[D / 2] = state.o;
    // the epilogue: l from the four lanes (offset 2, then 1), O scaled and cast, staged in the
    // warpgroup's Q rows (no longer read) and stored by TMA; LSE by each row's lane 0
    float l[2];
    for (int r = 0; r < 2; ++r) {
        const float x = a::add(st[r].lane_sum, shfl_xor(st[r].lane_sum, 2));
        l[r] = a::add(x, shfl_xor(x, 1));
    }
    // d[x] and d[x + 1] (x even) are one row's adjacent columns: one cvt.rn.satfinite.bf16x2.f32
    ROUNDSCOPE_UNROLL
    for (int x = 0; x < D / 2; x += 2) {
        const int r = x % 4 / 2;
        const float factor = steps::output_factor(l[r], f.p_scale);
        const float out[2] = {a::mul(o[x], factor), a::mul(o[x + 1], factor)};
        const std::uint32_t pair = bf16x2_rn_satfinite(out[0], out[1]);
        const auto row = static_cast<unsigned>(wgmma_row(static_cast<int>(t), x));
        const auto col = static_cast<unsigned>(wgmma_col(static_cast<int>(t), x));
        std::byte* at = shared + L::q + col / panel_cols * panel_bytes + w * 64 * 128 +
                        swizzled(row * 128 + col % panel_cols * 2, Swizzle::b128);
        std::memcpy(at, &pair, 4);  // an even column: the pair stays within its 16-byte chunk
        if (p.o_f32 != nullptr && rows[r] < p.n_q)
            for (int e = 0; e < 2; ++e) p.o_f32[(head * p.n_q + rows[r]) * D + col + e] = out[e];
    }
    fence_async_shared();
    named_barrier_sync(1 + w, 128);
    if (t == 0) {
        for (int c = 0; c < L::panels; ++c)
            tma_store(&p.o_map, shared + L::q + c * panel_bytes + w * 64 * 128, c * panel_cols,
                      static_cast<std::int32_t>(row0 + 64 * w), static_cast<std::int32_t>(head));
        tma_store_commit();
        tma_store_wait_read<0>();
    }
    if (lane % 4 == 0)
        for (int r = 0; r < 2; ++r)
            if (rows[r] < p.n_q) {
                const float l2 = steps::lse_log2(st[r].m, l[r]);
                p.lse2[head * p.n_q + rows[r]] = l2;
                p.lse[head * p.n_q + rows[r]] = a::mul(l2, steps::ln2);
            }
}

}  // namespace detail

/// Exp2: the recipe's exp2 (software, ex2.approx or ex2.approx.ftz), fixed at compile time so
/// that the inner loop holds one of them.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg>
ROUNDSCOPE_KERNEL void ROUNDSCOPE_LAUNCH_BOUNDS(threads, 1) forward_kernel(ROUNDSCOPE_GRID_CONSTANT ForwardParams p) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    (void)p;  // built for a GPU without wgmma and TMA: the host never launches it there
#else
    using L = SharedLayout<D>;
    std::byte* shared = shared_memory<std::byte>();
    shared += (1024 - shared_address(shared) % 1024) % 1024;
    auto& bar = *reinterpret_cast<detail::Barriers*>(shared + L::barriers);
    const std::uint64_t head = blockIdx.y, row0 = static_cast<std::uint64_t>(blockIdx.x) * block_m;
    const std::uint64_t rows = p.n_q - row0 < block_m ? p.n_q - row0 : block_m;
    const detail::TileWalk walk{(p.n_kv + block_n - 1) / block_n, row0 + rows, p.n_q, p.n_kv, p.causal, p.reverse};
    if (threadIdx.x == 0) {
        mbarrier_init(&bar.q_full, 1);
        for (int s = 0; s < 2; ++s) {
            mbarrier_init(&bar.k_full[s], 1), mbarrier_init(&bar.v_full[s], 1);
            mbarrier_init(&bar.k_empty[s], consumer_threads), mbarrier_init(&bar.v_empty[s], consumer_threads);
        }
        fence_mbarrier_init();  // the copy engine completes its loads on them
    }
    sync_threads();
    if (threadIdx.x < consumer_threads) {
        warpgroup_registers_increase<consumer_registers>();
        detail::consume<D, Exp2, Arg>(p, walk, shared, bar, row0, head);
    } else {
        warpgroup_registers_decrease<producer_registers>();
        if (threadIdx.x / 32 == consumer_threads / 32 && elect_one())  // one thread of the first producer warp
            detail::produce<D>(p, walk, shared, bar, static_cast<std::int32_t>(row0), static_cast<std::int32_t>(head));
    }
#endif
}

}  // namespace roundscope::gpu::hopper
