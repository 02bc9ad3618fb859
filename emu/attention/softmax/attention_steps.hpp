#pragma once
// The scalar steps of flash attention's softmax and its backward pass, shared by the CPU
// emulator (flash_forward.cpp, flash_backward.cpp) and the CUDA kernels (gpu/): one source, the same bits. All
// arithmetic is float32 with each rounding spelled out (f32_arith.hpp).
#include <cstdint>

#include "emu/attention/math/soft_exp2.hpp"
#include "emu/attention/math/softmax_choices.hpp"
#include "emu/numbers/f32_arith.hpp"
#include "emu/numbers/round.hpp"
#include "emu/numbers/unpack.hpp"

namespace roundscope::emu::steps {

inline constexpr float log2e = 0x1.715476p+0f;  // log2(e) rounded to float32
inline constexpr float ln2 = 0x1.62e430p-1f;    // ln(2) rounded to float32

ROUNDSCOPE_HD constexpr float minus_infinity() { return -__builtin_huge_valf(); }

/// exp2 as the recipe computes it (softmax_choices.hpp).
ROUNDSCOPE_HD inline float exp2(float x, Exp2Kind kind) { return exp2_of(x, kind); }

/// The softmax scale in log2 units, as FlashAttention folds it into exp2's argument.
ROUNDSCOPE_HD inline float scale_log2(float scale) { return f32_arith::mul(scale, log2e); }

/// A row's running max as exp2's arguments use it: -inf (no key yet) counts as 0, so that
/// exp2(t - m) of a masked t is exp2(-inf) = 0 rather than NaN.
ROUNDSCOPE_HD inline float usable_max(float m) { return m == minus_infinity() ? 0.0f : m; }

/// Qiu & Yao's max adjustment (arXiv:2510.04212, their attention.py): a block max reached by
/// more than one score (within 1e-3 in natural units) is moved above every score, to beta m
/// when positive and to 0 otherwise, so that no P-bar entry is exactly 1.
ROUNDSCOPE_HD inline float adjusted_block_max(float block_max, int near_max_count, float beta) {
    if (near_max_count <= 1) return block_max;
    return block_max > 0 ? f32_arith::mul(block_max, beta) : 0.0f;
}

/// How close to the block max (in log2 units) a score counts as another maximum: 1e-3 nats.
inline constexpr float near_max_log2 = 0x1.7a31a0p-10f;  // 1e-3 * log2(e), rounded to float32

/// The factor that carries the running sum and output from max m_old to m_new.
ROUNDSCOPE_HD inline float rescale(float m_old, float m_new, Exp2Kind kind) {
    if (m_old == minus_infinity()) return 0.0f;  // nothing accumulated yet
    return exp2(f32_arith::sub(m_old, usable_max(m_new)), kind);
}

/// The same factor from the raw scores' maxima, as FlashAttention-2 forms it:
/// exp2(RN(RN(m_old - m_new) c)) with m_new taken as 0 when -inf (0 when m_old is -inf).
ROUNDSCOPE_HD inline float rescale_raw(float m_old, float m_new, float scale_log2, Exp2Kind kind) {
    if (m_old == minus_infinity()) return 0.0f;
    return exp2(f32_arith::mul(f32_arith::sub(m_old, usable_max(m_new)), scale_log2), kind);
}

/// x rounded to f, nearest even, saturating (cvt.rn.satfinite): how every value the kernels
/// store in a narrower format (P, dS, O, the gradients) is rounded.
ROUNDSCOPE_HD inline std::uint32_t saturating_cast(float x, const Format& f) {
    CastOptions o;
    o.saturate = true;
    return static_cast<std::uint32_t>(cast_from_f32(x, f, o));
}

/// P-bar times the static scale S, rounded to the P format.
ROUNDSCOPE_HD inline std::uint32_t cast_p(float p, float p_scale, const Format& f) {
    return saturating_cast(f32_arith::mul(p, p_scale), f);
}

/// An accumulated gradient (float32 bits) times the scale (1: none), in the gradient format.
ROUNDSCOPE_HD inline std::uint32_t gradient_bits(std::uint32_t acc, float scale, const Format& f) {
    return saturating_cast(f32_arith::mul(float_from_bits(acc), scale), f);
}

/// 1 / (l S): what the accumulated output is multiplied by; 1 for an empty row (l = 0).
ROUNDSCOPE_HD inline float output_factor(float l, float p_scale) {
    if (l == 0.0f) return 1.0f;
    return f32_arith::div(1.0f, f32_arith::mul(l, p_scale));
}

/// m + log2 l, the LSE in log2 units; -inf for an empty row.
ROUNDSCOPE_HD inline float lse_log2(float m, float l) {
    if (l == 0.0f) return minus_infinity();
    return f32_arith::add(usable_max(m), soft_log2(l));
}

/// exp2's argument for a visible score s (f32) against m (the row max or the LSE, log2 units):
/// RN(RN(s c) - m) or, under exp2_arg=fma, RN(s c - m).
ROUNDSCOPE_HD inline float exp2_argument(float s, float scale_log2, float m, Exp2Arg arg) {
    return arg == Exp2Arg::fma ? f32_arith::fma(s, scale_log2, -m) : f32_arith::sub(f32_arith::mul(s, scale_log2), m);
}

/// dS = P (dP - delta).
ROUNDSCOPE_HD inline float d_score(float p, float dp, float delta) {
    return f32_arith::mul(p, f32_arith::sub(dp, delta));
}

/// delta = rowsum(dO * O) in float32, in feature order: dO and O given as bits of their formats
/// (O as stored, or its float32 value with o_format f32). Device code calls this one: its formats
/// come by value (a device takes no host constant by reference).
ROUNDSCOPE_HD inline float delta_rowsum_f32(const std::uint32_t* d_o, Format d_o_format, const std::uint32_t* o,
                                            Format o_format, int n) {
    float sum = 0;
    for (int c = 0; c < n; ++c)
        sum = f32_arith::add(sum, f32_arith::mul(static_cast<float>(decode(d_o_format, d_o[c])),
                                                 static_cast<float>(decode(o_format, o[c]))));
    return sum;
}

/// The same with a delta_format: f32 is delta_rowsum_f32; with a narrower one each product is
/// rounded to it, and so is their sum, taken exactly: PyTorch's (dO * O).sum() on BF16 tensors,
/// whose float32 reduction order is unspecified.
inline float delta_rowsum(const std::uint32_t* d_o, const Format& d_o_format, const std::uint32_t* o,
                          const Format& o_format, int n, const Format& delta_format = f32) {
    if (delta_format == f32) return delta_rowsum_f32(d_o, d_o_format, o, o_format, n);
    double exact = 0;
    for (int c = 0; c < n; ++c) {
        const float product =
            f32_arith::mul(static_cast<float>(decode(d_o_format, d_o[c])), static_cast<float>(decode(o_format, o[c])));
        exact += rounded_value(static_cast<double>(product), delta_format);
    }
    return static_cast<float>(rounded_value(static_cast<double>(static_cast<float>(exact)), delta_format));
}

/// One element of a backward tile: P = exp2(s c - LSE log2 e) from the score and the row's LSE
/// (0 where masked or in an empty row), its argument formed as the forward's (exp2_argument, or
/// with a bias b other than 0 in exp2's units RN(RN(RN(s c) + b) - LSE log2 e), as online_row_step
/// forms it); P and dS = P (dP - delta) cast (saturating) to the gradient products' format.
struct BackwardElement {
    float p;
    std::uint32_t p_cast, ds_cast;
};

/// P of a backward element, before its cast.
ROUNDSCOPE_HD inline float backward_p(std::uint32_t s, bool visible, float lse2, float scale_log2, Exp2Kind exp2_kind,
                                      Exp2Arg arg = Exp2Arg::mul_sub, float bias = 0.0f) {
    namespace a = f32_arith;
    return !visible || lse2 == minus_infinity() || bias == minus_infinity() ? 0.0f
           : bias != 0.0f ? exp2(a::sub(a::add(a::mul(float_from_bits(s), scale_log2), bias), lse2), exp2_kind)
                          : exp2(exp2_argument(float_from_bits(s), scale_log2, lse2, arg), exp2_kind);
}

ROUNDSCOPE_HD inline BackwardElement backward_element(std::uint32_t s, std::uint32_t dp, bool visible, float lse2,
                                                      float delta, float scale_log2, Exp2Kind exp2_kind,
                                                      const Format& g, Exp2Arg arg = Exp2Arg::mul_sub,
                                                      float bias = 0.0f) {
    const float p = backward_p(s, visible, lse2, scale_log2, exp2_kind, arg, bias);
    return {p, saturating_cast(p, g), saturating_cast(d_score(p, float_from_bits(dp), delta), g)};
}

// ---- masks --------------------------------------------------------------------------------

/// The keys [0, visible_keys(i)) that query row i sees: all, or under the causal mask those at
/// or before its position i + n_kv - n_q (bottom-right alignment, FlashAttention 2.1+).
ROUNDSCOPE_HD inline std::uint64_t visible_keys(std::uint64_t i, std::uint64_t n_q, std::uint64_t n_kv, bool causal) {
    if (!causal) return n_kv;
    const auto end =
        static_cast<std::int64_t>(i) + static_cast<std::int64_t>(n_kv) - static_cast<std::int64_t>(n_q) + 1;
    if (end < 0) return 0;
    return static_cast<std::uint64_t>(end) < n_kv ? static_cast<std::uint64_t>(end) : n_kv;
}

/// Does the causal mask hide the whole KV tile starting at key0 from query rows [.., row_end)?
/// The last row sees the most keys: the tile is skipped when even that row sees none of it.
ROUNDSCOPE_HD inline bool tile_masked(std::uint64_t row_end, std::uint64_t key0, std::uint64_t n_q, std::uint64_t n_kv,
                                      bool causal) {
    return key0 >= visible_keys(row_end - 1, n_q, n_kv, causal);
}

/// Under the diagonal fix of block-quantized V: key j lies in (or after) the V block of row i's
/// own position, so row i multiplies it unquantized ("Future leakage in block-quantized attention": only that block can
/// hold tokens after the query).
ROUNDSCOPE_HD inline bool diagonal_key(std::uint64_t i, std::uint64_t j, std::uint64_t n_q, std::uint64_t n_kv,
                                       int v_block) {
    const std::int64_t p =
        static_cast<std::int64_t>(i) + static_cast<std::int64_t>(n_kv) - static_cast<std::int64_t>(n_q);
    const std::int64_t own = (p < 0 ? p - v_block + 1 : p) / v_block;  // floor division
    return static_cast<std::int64_t>(j) / v_block >= own;
}

// ---- one row of one KV tile of the online softmax ------------------------------------------

/// The choices of the online softmax a recipe makes (attention_recipe.hpp), as a kernel takes them.
struct OnlineSoftmax {
    float scale_log2;
    Exp2Kind exp2;
    bool max_adjust;
    float max_adjust_beta;
    float p_scale;
    Format p_format;
    RescaleArg rescale_arg = RescaleArg::scaled;
    RowSum row_sum = RowSum::sequential;
    Exp2Arg exp2_arg = Exp2Arg::mul_sub;
    int max_offset = 0;  // k: P-bar = exp2(s c - (m - k)), in [0, 2^k]
};

/// 2^k: what a max offset of k scales P-bar and l by.
ROUNDSCOPE_HD inline float offset_scale(int max_offset) { return static_cast<float>(std::uint64_t{1} << max_offset); }

/// The row sum without the max offset's 2^k, l 2^-k (exact: a power of two), as the LSE takes it.
ROUNDSCOPE_HD inline float offset_free_sum(float l, int max_offset) {
    return f32_arith::mul(l, 1.0f / offset_scale(max_offset));
}

/// The max exp2's argument is taken against: the row max m (log2 units, 0 when -inf), or under a
/// max offset k FlashAttention-3's max_scaled, m c - k from the raw max in one fma where the
/// argument is an fma (its `max * scale - max_offset`, contracted as its `s * scale - max_scaled`
/// is), else RN(m - k); 0 when the row has no key yet (its Check_inf).
ROUNDSCOPE_HD inline float exp2_max(const OnlineSoftmax& f, float m, float m_raw) {
    if (f.max_offset == 0 || m == minus_infinity()) return usable_max(m);
    const float k = static_cast<float>(f.max_offset);
    return f.exp2_arg == Exp2Arg::fma ? f32_arith::fma(m_raw, f.scale_log2, -k) : f32_arith::sub(m, k);
}

/// A row's running state: max m (log2 units, after any adjustment), sum l, the largest
/// unadjusted score with how many keys reached it (the analyses' repeated maxima), the max of the
/// raw scores, and under row_sum=quad-ffma the four lanes' partial sums (l is then their sum).
struct OnlineRowState {
    float m = minus_infinity(), l = 0, true_max = minus_infinity();
    std::uint64_t true_max_count = 0;
    float m_raw = minus_infinity();
    float lanes[4] = {0, 0, 0, 0};
};

/// The row sum of four lanes' partials: the butterfly with offset 2, then 1.
ROUNDSCOPE_HD inline float quad_sum(const float (&lanes)[4]) {
    return f32_arith::add(f32_arith::add(lanes[0], lanes[2]), f32_arith::add(lanes[1], lanes[3]));
}

/// What the forward pass counts on the way (the analyses read them).
struct ForwardCounts {
    std::uint64_t p_bar_one = 0;           // P-bar entries that are 1 after the cast to P's format
    std::uint64_t p_nonzero = 0;           // P-bar entries above zero, unmasked, not in the sink
    std::uint64_t p_underflow = 0;         // ... that the P cast turned into zero
    std::uint64_t p_saturated = 0;         // P-bar entries whose P S exceeds the format's max (clipped, or Inf)
    std::uint64_t repeated_max_rows = 0;   // rows whose final max is reached by two or more keys
    std::uint64_t tied_rows = 0;           // rows ending with two or more keys whose cast P-bar is 1
    std::uint64_t tie_dominated_rows = 0;  // ... whose tied keys hold more than 1 - 2^-9 of the row's P-bar mass
    double tie_share_sum = 0;              // the tied keys' share of the P-bar mass, summed over tied rows
    std::uint64_t one_key_rows = 0;        // rows whose one key of cast P-bar 1 holds more than 1 - 2^-9 of
                                           // the mass, but not all: l = 1 + e, e > 0, rounds to 1 in BF16
    std::uint64_t skip_keys = 0;           // keys [0, skip_keys) are not counted (an attention sink)
};

/// c's counts added into `to` (skip_keys, a setting, is left as it is).
inline void add_counts(ForwardCounts& to, const ForwardCounts& c) {
    to.p_bar_one += c.p_bar_one, to.p_nonzero += c.p_nonzero, to.p_underflow += c.p_underflow;
    to.p_saturated += c.p_saturated, to.repeated_max_rows += c.repeated_max_rows;
    to.tied_rows += c.tied_rows, to.tie_dominated_rows += c.tie_dominated_rows, to.tie_share_sum += c.tie_share_sum;
    to.one_key_rows += c.one_key_rows;
}

/// A row's keys whose P-bar is 1 after the cast to P's format (ties at the running max) and the
/// P-bar mass they and the whole row hold, in exact sums relative to the running max (Qiu &
/// Yao's mechanism acts where the tied keys hold all but less than half a BF16 ulp of the row).
struct RowTies {
    std::uint64_t ones = 0;
    double ones_mass = 0, mass = 0;

    /// The running max moved: `factor` carries the row's mass to it, and keys counted before are
    /// no longer at it unless the factor rounds to 1.
    ROUNDSCOPE_HD void rescale(float factor) {
        if (factor != 1.0f) ones = 0, ones_mass = 0;
        mass *= static_cast<double>(factor);
    }
    ROUNDSCOPE_HD void add(float p, bool one) {
        mass += static_cast<double>(p);
        if (one) ++ones, ones_mass += static_cast<double>(p);
    }
};

/// The share a tie must exceed for the row's other keys to sum to less than half a BF16 ulp.
inline constexpr double tie_dominance = 1.0 - 0x1p-9;

/// Counts a finished row's ties, and a row one key holds as a tie would.
ROUNDSCOPE_HD inline void count_ties(const RowTies& t, ForwardCounts& c) {
    if (t.ones == 0 || !(t.mass > 0)) return;
    const double share = t.ones_mass / t.mass;
    if (t.ones == 1) {
        // Not a row the key holds entirely (its only visible key, or the rest exactly zero):
        // there l = 1 exactly, and nothing rounds.
        if (share > tie_dominance && share < 1) ++c.one_key_rows;
        return;
    }
    ++c.tied_rows;
    c.tie_share_sum += share;
    if (share > tie_dominance) ++c.tie_dominated_rows;
}

/// What counting a row's P needs of its format, found once a row step rather than once a key:
/// the cast of P-bar = 1 (a cast P equal to it is P-bar = 1: scores within about half an ulp of
/// P's format below the max become 1 as well) and the largest finite P.
struct PCastConstants {
    std::uint32_t one;
    double largest;
    ROUNDSCOPE_HD PCastConstants(float p_scale, const Format& f)
        : one(saturating_cast(p_scale, f)), largest(decode(f, max_finite_bits(f))) {}
};

/// Counts one unmasked P-bar value and its cast of P S (of key `key`: the sink's keys count
/// only towards p_bar_one and p_saturated).
ROUNDSCOPE_HD inline void count_p(float p, float p_scale, std::uint32_t cast, const Format& f, std::uint64_t key,
                                  ForwardCounts& c, const PCastConstants& k) {
    if (cast == k.one) ++c.p_bar_one;
    if (static_cast<double>(f32_arith::mul(p, p_scale)) > k.largest) ++c.p_saturated;  // clipped (or Inf)
    if (!(p > 0.0f) || key < c.skip_keys) return;
    ++c.p_nonzero;
    if (decode(f, cast) == 0) ++c.p_underflow;
}
ROUNDSCOPE_HD inline void count_p(float p, float p_scale, std::uint32_t cast, const Format& f, std::uint64_t key,
                                  ForwardCounts& c) {
    count_p(p, p_scale, cast, f, key, c, PCastConstants(p_scale, f));
}

// ---- the row step's rules, one code for the emulator's row step and the kernels' ----------

/// A row's running maxima after a tile whose largest score is `block_max` (log2 units) and
/// largest raw score `raw_max`, and alpha, the factor that carries its sum and output to the new
/// maximum (from the scaled maxima, or from the raw ones under rescale_arg=raw).
struct MaxStep {
    float m, m_raw, factor;
};
ROUNDSCOPE_HD inline MaxStep advance_max(float m, float m_raw, float block_max, float raw_max, RescaleArg arg,
                                         float scale_log2, Exp2Kind kind) {
    const float m_new = f32_arith::max(m, block_max), m_raw_new = f32_arith::max(m_raw, raw_max);
    return {m_new, m_raw_new,
            arg == RescaleArg::raw ? rescale_raw(m_raw, m_raw_new, scale_log2, kind) : rescale(m, m_new, kind)};
}

/// P-bar of an unmasked, unbiased score s: exp2 of its argument against m_arg in the recipe's form.
ROUNDSCOPE_HD inline float p_bar(float s, float scale_log2, float m_arg, Exp2Arg arg, Exp2Kind kind) {
    return exp2(exp2_argument(s, scale_log2, m_arg, arg), kind);
}

/// row_sum=quad-ffma: a lane's partial sum after one more P-bar; the lane's first key of a tile
/// carries the rescale (one FFMA), the others are added.
ROUNDSCOPE_HD inline float quad_ffma_add(float lane, float p, float factor, bool first_of_tile) {
    return first_of_tile ? f32_arith::fma(lane, factor, p) : f32_arith::add(lane, p);
}

/// One row of one tile: s holds the n scores (f32 bits) of the tile's keys, the first `visible`
/// unmasked. Updates the state, writes the cast P (p_format bits) and returns the factor that
/// carries the row's accumulated output to the new max. Counts when asked (key0: the tile's
/// first key, for counts.skip_keys; ties: the row's, with the counts). `bias`, when given, holds
/// each key's mask in exp2's units (FlashContext::tile_bias): -inf masks the key exactly as
/// `visible` does, 0 leaves its score as it is, another value b makes it t = RN(RN(s c) + b) and
/// exp2's argument RN(t - m) (recipes whose argument is an fma of the raw score refuse such masks).
ROUNDSCOPE_HD inline float online_row_step(const OnlineSoftmax& f, const std::uint32_t* s, int n, int visible,
                                           OnlineRowState& st, std::uint32_t* p_out, ForwardCounts* counts,
                                           std::uint64_t key0 = 0, RowTies* ties = nullptr,
                                           const float* bias = nullptr) {
    namespace a = f32_arith;
    auto masked = [&](int j) { return j >= visible || (bias != nullptr && bias[j] == minus_infinity()); };
    auto biased = [&](int j) { return bias != nullptr && bias[j] != 0.0f; };
    auto t_of = [&](int j) {
        if (masked(j)) return minus_infinity();
        const float t = a::mul(float_from_bits(s[j]), f.scale_log2);
        return biased(j) ? a::add(t, bias[j]) : t;
    };
    float block_max = minus_infinity();
    for (int j = 0; j < n; ++j) block_max = a::max(block_max, t_of(j));
    int near_max = 0, at_max = 0;
    for (int j = 0; j < n; ++j) {
        const float t = t_of(j);
        if (t != minus_infinity() && a::sub(block_max, t) <= near_max_log2) ++near_max;
        if (t == block_max && block_max != minus_infinity()) ++at_max;
    }
    if (block_max > st.true_max) st.true_max = block_max, st.true_max_count = 0;
    if (block_max == st.true_max) st.true_max_count += static_cast<std::uint64_t>(at_max);
    if (f.max_adjust) block_max = adjusted_block_max(block_max, near_max, f.max_adjust_beta);
    float raw_max = minus_infinity();
    for (int j = 0; j < visible; ++j)
        if (!masked(j)) raw_max = a::max(raw_max, float_from_bits(s[j]));
    const auto [m_new, m_raw_new, factor] =
        advance_max(st.m, st.m_raw, block_max, raw_max, f.rescale_arg, f.scale_log2, f.exp2);
    if (ties != nullptr) ties->rescale(factor);
    float sum = 0;
    float lane_sums[4] = {0, 0, 0, 0};         // row_sum=lane-tile, mem-eff: each lane's keys of this tile (mem-eff: of
                                               // this warp's 32 keys)
    float mem_eff_sum = a::mul(st.l, factor);  // row_sum=mem-eff: l alpha, then each warp's sum
    const PCastConstants k(a::mul(f.p_scale, offset_scale(f.max_offset)), f.p_format);
    const float m_arg = exp2_max(f, m_new, m_raw_new);
    for (int j = 0; j < n; ++j) {
        // P-bar = exp2(s c - m) in the recipe's form; 0 for a masked key
        const float p = masked(j)   ? 0.0f
                        : biased(j) ? exp2(a::sub(t_of(j), m_arg), f.exp2)
                                    : p_bar(float_from_bits(s[j]), f.scale_log2, m_arg, f.exp2_arg, f.exp2);
        p_out[j] = cast_p(p, f.p_scale, f.p_format);
        if (counts != nullptr && !masked(j))
            count_p(p, f.p_scale, p_out[j], f.p_format, key0 + static_cast<std::uint64_t>(j), *counts, k);
        if (ties != nullptr && !masked(j)) ties->add(p, p_out[j] == k.one);
        if (f.row_sum == RowSum::sequential) {
            sum = a::add(sum, p);
        } else if (f.row_sum == RowSum::mem_eff) {  // a warp's lane t: keys j with (j mod 8) / 2 = t, from zero
            float& lane = lane_sums[(j % 8) / 2];
            lane = a::add(lane, p);
            if (j % 32 == 31 || j == n - 1) {  // the warp's quad joins its lanes (xor 1, then 2)
                mem_eff_sum =
                    a::add(mem_eff_sum, a::add(a::add(lane_sums[0], lane_sums[1]), a::add(lane_sums[2], lane_sums[3])));
                for (float& x : lane_sums) x = 0;
            }
        } else if (f.row_sum == RowSum::lane_tile ||
                   f.row_sum == RowSum::cudnn) {  // lane (j mod 8) / 2, the tile's first
            float& lane = lane_sums[(j % 8) / 2];
            lane = j < 8 && j % 2 == 0 ? p : a::add(lane, p);
        } else {  // lane (j mod 8) / 2: its first key of the tile fused with the rescale
            float& lane = st.lanes[(j % 8) / 2];
            lane = quad_ffma_add(lane, p, factor, j < 8 && j % 2 == 0);
        }
    }
    st.m = m_new;
    st.m_raw = m_raw_new;
    if (f.row_sum == RowSum::lane_tile || f.row_sum == RowSum::cudnn) {  // a lane with no key in the tile adds +0
        for (int t = 0; t < 4; ++t) st.lanes[t] = a::fma(st.lanes[t], factor, lane_sums[t]);
        st.l = f.row_sum == RowSum::cudnn ? a::add(a::add(st.lanes[0], st.lanes[1]), a::add(st.lanes[2], st.lanes[3]))
                                          : quad_sum(st.lanes);
        return factor;
    }
    if (f.row_sum == RowSum::mem_eff) {
        st.l = mem_eff_sum;
        return factor;
    }
    if (f.row_sum == RowSum::quad_ffma) {
        for (int t = 0; t < 4; ++t)  // a lane whose keys all lie past the tile's end: fma(l, alpha, 0)
            if (2 * t >= n) st.lanes[t] = a::mul(st.lanes[t], factor);
        st.l = quad_sum(st.lanes);
        return factor;
    }
    st.l = a::add(a::mul(st.l, factor), sum);
    return factor;
}

}  // namespace roundscope::emu::steps
