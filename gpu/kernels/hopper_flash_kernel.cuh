#pragma once
// The FlashAttention-3-style BF16 forward kernel for Hopper (sm_90a), whose arithmetic is the
// recipe h100-bf16 (emu/attention/recipe/recipe_presets.cpp): one thread block per 128 query rows of
// one head; a producer warpgroup, whose one thread issues TMA loads of Q once and of K and V
// into a two-stage ring, gives its registers to the consumers (setmaxnreg: 24 and 240 of them);
// two consumer warpgroups of 64 rows each compute S = Q K^T by wgmma (both operands in shared
// memory), the online softmax on S's accumulator fragments, and O += P V by wgmma with P from
// registers and V read MN-major; the epilogue writes O through shared memory with a TMA store.
// Each consumer warpgroup pipelines its tiles as FlashAttention-3 does (pipelined_step): tile
// j + 1's S and tile j's P V issued together, tile j + 1's softmax run while P V is on the
// tensor cores, O rescaled and P cast once it completes: the same arithmetic in the same order.
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
// differ, which no output reads: test_emu_exhaustive_max_zero_sign), the scaled maximum taken as RN(raw max x c)
// (rounding is monotone and c > 0, so it is the maximum of RN(s c)), and its sum kept per lane, as row_sum=quad-ffma
// states.
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
inline constexpr std::uint32_t stages = 2;                              // the K/V ring's depth: tiles loaded ahead
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
    // Q, the ring's K stages, its V stages, then the barriers (detail::Barriers: Q's and four a stage)
    static constexpr std::uint32_t q = 0, k = tile, v = (1 + stages) * tile, barriers = (1 + 2 * stages) * tile;
    // and up to 1 KiB to align the tiles to the 128-byte swizzle's period (dynamic shared memory
    // is only 16-byte aligned on the GPU)
    static constexpr std::uint32_t bytes = barriers + (1 + 4 * stages) * 8 + 1024;
};

namespace detail {

namespace a = emu::f32_arith;
namespace steps = emu::steps;

// Named barriers (bar.sync ids; 0 is __syncthreads): consumer warpgroup w's epilogue takes 1 + w.
inline constexpr unsigned epilogue_barrier = 1;

struct Barriers {
    std::uint64_t q_full, k_full[stages], v_full[stages], k_empty[stages], v_empty[stages];
};
static_assert(sizeof(Barriers) == (1 + 4 * stages) * 8, "SharedLayout's room for the barriers");

// A tile's place in the K/V ring: the ring's n-th tile sits in stage n % stages, and its full and
// empty barriers are in the phase of parity n / stages % 2; advanced tile by tile without a
// division.
struct RingSlot {
    std::uint32_t stage = 0, parity = 0;
    ROUNDSCOPE_DEVICE RingSlot next() const {
        return stage + 1 == stages ? RingSlot{0, parity ^ 1u} : RingSlot{stage + 1, parity};
    }
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

// The producer: Q once, then each tile's K and V into its ring stage once the stage's previous
// tile (the ring's depth before it) has been released.
template <int D>
ROUNDSCOPE_DEVICE void produce(const ForwardParams& p, const TileWalk& walk, std::byte* shared, Barriers& bar,
                               std::int32_t row0, std::int32_t head) {
    using L = SharedLayout<D>;
    mbarrier_arrive(&bar.q_full, L::tile);
    for (int c = 0; c < L::panels; ++c)
        tma_load(&p.q_map, shared + L::q + c * panel_bytes, c * panel_cols, row0, head, &bar.q_full);
    RingSlot slot;
    std::uint32_t loaded = 0;
    for (std::uint64_t step = 0; step < walk.tiles; ++step) {
        if (walk.skipped(step)) continue;
        const auto key0 = static_cast<std::int32_t>(walk.key0(step));
        const std::uint32_t s = slot.stage;
        // the stage's previous tile was released in the phase before this one's
        if (loaded >= stages) mbarrier_wait_parity(&bar.k_empty[s], slot.parity ^ 1u);
        mbarrier_arrive(&bar.k_full[s], L::tile);
        for (int c = 0; c < L::panels; ++c)
            tma_load(&p.k_map, shared + L::k + s * L::tile + c * panel_bytes, c * panel_cols, key0, head,
                     &bar.k_full[s]);
        if (loaded >= stages) mbarrier_wait_parity(&bar.v_empty[s], slot.parity ^ 1u);
        mbarrier_arrive(&bar.v_full[s], L::tile);
        for (int c = 0; c < L::panels; ++c)
            tma_load(&p.v_map, shared + L::v + s * L::tile + c * panel_bytes, c * panel_cols, key0, head,
                     &bar.v_full[s]);
        slot = slot.next(), ++loaded;
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
// their online state, its share of O, the ring slot of the tile whose P V comes next, and
// the scores of the tile in flight (S, then P-bar in the same registers) with the previous
// tile's P cast for its P V.
template <int D>
struct ConsumerState {
    std::uint64_t rows[2];
    RowState st[2];
    float o[D / 2];
    RingSlot slot;                 // the ring slot of the tile whose P is in p
    float s[block_n / 2];          // s[4 j + e]: row rows[e / 2], key key0 + 8 j + 2 (lane % 4) + e % 2
    std::uint32_t p[block_n / 4];  // [2 j + r]: P of row r at keys 8 j + 2 (lane % 4) and + 1, BF16
};

// Issues S = Q K^T of a ring slot over D / 16 chained steps, once its K has landed: one group.
template <int D>
ROUNDSCOPE_DEVICE void issue_scores(float (&s)[block_n / 2], Barriers& bar, std::uint32_t base, std::uint32_t q_rows,
                                    RingSlot slot) {
    using L = SharedLayout<D>;
    mbarrier_wait_parity(&bar.k_full[slot.stage], slot.parity);
    wgmma_fence();
    ROUNDSCOPE_UNROLL
    for (int kk = 0; kk < D / 16; ++kk)
        wgmma_bf16_ss<block_n>(s, k_major_step(q_rows, kk), k_major_step(base + L::k + slot.stage * L::tile, kk),
                               kk > 0);
    wgmma_commit_group();
}

// Issues O += P V of a ring slot, once its V has landed: one group. P's registers and O's stay
// the wgmma's until the group completes.
template <int D>
ROUNDSCOPE_DEVICE void issue_pv(float (&o)[D / 2], const std::uint32_t (&p)[block_n / 4], Barriers& bar,
                                std::uint32_t base, RingSlot slot) {
    using L = SharedLayout<D>;
    mbarrier_wait_parity(&bar.v_full[slot.stage], slot.parity);
    wgmma_fence();
    pv_product<D>(o, p, base + L::v + slot.stage * L::tile);
    wgmma_commit_group();
}

// The online softmax of one tile's scores (the tile at key0), in place: each row's maximum, its
// rescale factor, P-bar = exp2 of each score and the lane's share of l. Masked: the tile holds
// keys some row of the block does not see (a partial last tile, the causal diagonal), whose
// scores are taken as -inf (P-bar = exp2(-inf) = +0, as the row step's masked keys, without a
// branch around each exp2); otherwise every score is taken as it is, without the compare and
// select.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg, bool Masked>
ROUNDSCOPE_DEVICE void softmax_tile(const ForwardParams& p, ConsumerState<D>& c, std::uint64_t key0,
                                    float (&factor)[2]) {
    const unsigned lane = threadIdx.x % 32;
    const steps::OnlineSoftmax& f = p.softmax;
    const std::uint64_t keys = p.n_kv - key0 < block_n ? p.n_kv - key0 : block_n;
    ROUNDSCOPE_UNROLL
    for (int r = 0; r < 2; ++r) {
        RowState& st = c.st[r];
        if constexpr (Masked) {
            const std::uint64_t visible = steps::visible_keys(c.rows[r], p.n_q, p.n_kv, p.causal);
            const int in_tile = static_cast<int>(visible <= key0 ? 0 : (visible - key0 < keys ? visible - key0 : keys));
            ROUNDSCOPE_UNROLL
            for (int q = 0; q < block_n / 4; ++q)  // key 8 (q / 2) + 2 (lane % 4) + q % 2
                if (8 * (q / 2) + 2 * static_cast<int>(lane % 4) + q % 2 >= in_tile)
                    c.s[4 * (q / 2) + 2 * r + q % 2] = steps::minus_infinity();
        }
        float raw = steps::minus_infinity();
        ROUNDSCOPE_UNROLL
        for (int q = 0; q < block_n / 4; ++q) raw = a::max(raw, c.s[4 * (q / 2) + 2 * r + q % 2]);
        raw = quad_max(raw);
        const float m_new = a::max(st.m, a::mul(raw, f.scale_log2)), m_raw_new = a::max(st.m_raw, raw);
        factor[r] = f.rescale_arg == emu::RescaleArg::raw ? steps::rescale_raw(st.m_raw, m_raw_new, f.scale_log2, Exp2)
                                                          : steps::rescale(st.m, m_new, Exp2);
        ROUNDSCOPE_UNROLL
        for (int q = 0; q < block_n / 4; ++q) {
            float& x = c.s[4 * (q / 2) + 2 * r + q % 2];
            x = steps::exp2(steps::exp2_argument(x, f.scale_log2, steps::usable_max(m_new), Arg), Exp2);
            // the lane's first key of the tile carries the rescale (one FFMA)
            st.lane_sum = q == 0 ? a::fma(st.lane_sum, factor[r], x) : a::add(st.lane_sum, x);
        }
        st.m = m_new, st.m_raw = m_raw_new;
    }
}

// After the previous tile's P V has completed: O rescaled by the factors of the tile whose
// softmax just ran, and that tile's P cast (steps::cast_p into BF16, a pair by one
// cvt.rn.satfinite.bf16x2.f32) into the registers its P V reads. ScaledP: p_scale is not 1 (P-bar
// times 1 is P-bar, NaN aside, which the cast makes its one NaN either way: no multiply then).
template <int D, bool ScaledP>
ROUNDSCOPE_DEVICE void rescale_and_cast(const ForwardParams& p, ConsumerState<D>& c, const float (&factor)[2]) {
    ROUNDSCOPE_UNROLL
    for (int x = 0; x < D / 2; ++x) c.o[x] = a::mul(c.o[x], factor[x % 4 / 2]);
    const float scale = p.softmax.p_scale;
    ROUNDSCOPE_UNROLL
    for (int q = 0; q < block_n / 4; ++q) {  // q = 2 j + r: row r's keys 8 j + 2 (lane % 4) and + 1
        const float lo = c.s[4 * (q / 2) + 2 * (q % 2)], hi = c.s[4 * (q / 2) + 2 * (q % 2) + 1];
        c.p[q] = ScaledP ? bf16x2_rn_satfinite(a::mul(lo, scale), a::mul(hi, scale)) : bf16x2_rn_satfinite(lo, hi);
    }
}

// One step of FlashAttention-3's intra-warpgroup pipelining: the next tile's S = Q K^T and the
// current tile's O += P V issued together, the next tile's softmax run while P V is on the
// tensor cores, then O rescaled and the next P cast. The arithmetic is the unpipelined order's:
// O = RN(O x factor_j) then O += P_j V_j, tile after tile.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg, bool ScaledP, bool MaskedNext>
ROUNDSCOPE_DEVICE void pipelined_step(const ForwardParams& p, Barriers& bar, std::uint32_t base, std::uint32_t q_rows,
                                      ConsumerState<D>& c, std::uint64_t next_key0) {
    const RingSlot current = c.slot, next = current.next();  // the current tile's P is cast in c.p
    issue_scores<D>(c.s, bar, base, q_rows, next);
    issue_pv<D>(c.o, c.p, bar, base, current);
    wgmma_wait_group<1>();  // the next tile's S (the older group) has completed
    mbarrier_arrive(&bar.k_empty[next.stage]);
    float factor[2];
    softmax_tile<D, Exp2, Arg, MaskedNext>(p, c, next_key0, factor);
    wgmma_wait_group<0>();  // and the current tile's P V
    mbarrier_arrive(&bar.v_empty[current.stage]);
    rescale_and_cast<D, ScaledP>(p, c, factor);
    c.slot = next;
}

// One consumer warpgroup (w = 0, 1): rows row0 + 64 w .. + 63 of the block.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg, bool ScaledP>
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
    auto visible_from = [&](std::uint64_t step) {
        while (step < walk.tiles && walk.skipped(step)) ++step;
        return step;
    };
    std::uint64_t next = visible_from(0);
    if (next < walk.tiles) {
        // the first tile: its S and softmax alone
        issue_scores<D>(state.s, bar, base, q_rows, state.slot);
        wgmma_wait_group<0>();
        mbarrier_arrive(&bar.k_empty[state.slot.stage]);
        float factor[2];
        if (whole(next))
            softmax_tile<D, Exp2, Arg, false>(p, state, walk.key0(next), factor);
        else
            softmax_tile<D, Exp2, Arg, true>(p, state, walk.key0(next), factor);
        rescale_and_cast<D, ScaledP>(p, state, factor);
        // each later tile's S and softmax beside the one before's P V, in a loop by its mask
        for (next = visible_from(next + 1); next < walk.tiles && !whole(next); next = visible_from(next + 1))
            pipelined_step<D, Exp2, Arg, ScaledP, true>(p, bar, base, q_rows, state, walk.key0(next));
        for (; next < walk.tiles && whole(next); ++next)
            pipelined_step<D, Exp2, Arg, ScaledP, false>(p, bar, base, q_rows, state, walk.key0(next));
        for (next = visible_from(next); next < walk.tiles; next = visible_from(next + 1))
            pipelined_step<D, Exp2, Arg, ScaledP, true>(p, bar, base, q_rows, state, walk.key0(next));
        // the last tile's P V
        issue_pv<D>(state.o, state.p, bar, base, state.slot);
        wgmma_wait_group<0>();
        mbarrier_arrive(&bar.v_empty[state.slot.stage]);
    }
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
    named_barrier_sync(epilogue_barrier + w, 128);
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

/// Exp2: the recipe's exp2 (software, ex2.approx or ex2.approx.ftz), Arg its argument's form and
/// ScaledP whether P is scaled (p_scale not 1), fixed at compile time so that the inner loop holds
/// one of each.
template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg, bool ScaledP>
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
        for (std::uint32_t s = 0; s < stages; ++s) {
            mbarrier_init(&bar.k_full[s], 1), mbarrier_init(&bar.v_full[s], 1);
            mbarrier_init(&bar.k_empty[s], consumer_threads), mbarrier_init(&bar.v_empty[s], consumer_threads);
        }
        fence_mbarrier_init();  // the copy engine completes its loads on them
    }
    sync_threads();
    if (threadIdx.x < consumer_threads) {
        warpgroup_registers_increase<consumer_registers>();
        detail::consume<D, Exp2, Arg, ScaledP>(p, walk, shared, bar, row0, head);
    } else {
        warpgroup_registers_decrease<producer_registers>();
        if (threadIdx.x / 32 == consumer_threads / 32 && elect_one())  // one thread of the first producer warp
            detail::produce<D>(p, walk, shared, bar, static_cast<std::int32_t>(row0), static_cast<std::int32_t>(head));
    }
#endif
}

}  // namespace roundscope::gpu::hopper
