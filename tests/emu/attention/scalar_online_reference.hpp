#pragma once
// The online forward pass of one query row, written straight from the recipe's definition: no
// tiles of rows, every S and P V element from mma_dot (or float64 where the recipe says so). A
// second implementation beside the tiled emulator (emu/attention/flash/flash_forward.cpp), with its
// own reading of the mask: the row's band (the keys causality and a window leave) and a value per
// key (natural units: 0, finite, or -inf), both given by the test from its own arrays.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/math/libdevice_math.hpp"
#include "emu/attention/math/softcap.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/block/block_format.hpp"
#include "emu/mma/fused_dot_add.hpp"
#include "emu/mma/mma_model.hpp"
#include "tests/emu/attention/mx_reference.hpp"

namespace roundscope::test {

/// O in o_format bits and lse_log2 of one row.
struct RowResult {
    std::vector<std::uint32_t> o;
    float lse2;
};

/// One product element as the recipe takes it: D = C + a . b (b with a stride) through the
/// tensor-core model, or in float64 (exact products summed in order from C, rounded once).
struct ScalarProduct {
    emu::Product kind;
    const emu::MmaModel* model;
    const emu::Format *a_format, *b_format;
    std::uint32_t operator()(const std::uint32_t* a, const std::uint32_t* b, long stride, int k,
                             std::uint32_t c) const {
        if (kind == emu::Product::model) return emu::mma_dot(*model, a, b, stride, k, c);
        double sum = float_from_bits(c);
        for (int t = 0; t < k; ++t) sum += emu::decode(*a_format, a[t]) * emu::decode(*b_format, b[t * stride]);
        return bits_of(static_cast<float>(sum));
    }
};

inline std::vector<std::uint32_t> mx_blocks(const std::uint32_t* x, std::size_t n, const emu::Format& f,
                                            const emu::BlockFormat& b, const emu::Format& to) {
    return test::mx_blocks(x, n, 1, f, b, to);
}

/// The keys [first, second) row i's band leaves it, and the mask's value of (head, row, key).
struct RowMask {
    std::function<std::pair<std::uint64_t, std::uint64_t>(std::uint64_t)> band;
    std::function<double(std::uint64_t, std::uint64_t, std::uint64_t)> value;
};

/// The causal flag's mask of `sh` alone (bottom-right, no value).
inline RowMask causal_mask(const emu::AttentionShape& sh) {
    return {[sh](std::uint64_t i) {
                const std::int64_t p = static_cast<std::int64_t>(i + sh.n_kv) - static_cast<std::int64_t>(sh.n_q);
                const std::uint64_t end = !sh.causal ? sh.n_kv
                                                     : static_cast<std::uint64_t>(std::clamp<std::int64_t>(
                                                           p + 1, 0, static_cast<std::int64_t>(sh.n_kv)));
                return std::pair<std::uint64_t, std::uint64_t>{0, end};
            },
            [](std::uint64_t, std::uint64_t, std::uint64_t) { return 0.0; }};
}

inline RowResult scalar_online_row(const emu::AttentionRecipe& r, const emu::AttentionShape& sh,
                                   const emu::AttentionOperands& in, std::uint64_t head, std::uint64_t i,
                                   const RowMask& mask) {
    namespace a = emu::f32_arith;
    using emu::f32;
    const ScalarProduct score{
        r.scores.product,
        emu::find_mma_model(r.target.arch, r.target.instruction, *r.target.input, *r.target.input, f32), r.target.input,
        r.target.input};
    const ScalarProduct pv{
        r.p_and_v.product,
        emu::find_mma_model(r.target.arch, r.target.instruction, *r.p_and_v.p_format, *r.target.input, f32),
        r.p_and_v.p_format, r.target.input};
    const std::uint64_t d = sh.d, dv = sh.d_v, nk = sh.n_kv, kv = head / sh.kv_group;
    // qk_quant: q and every key quantized along D first
    std::vector<std::uint32_t> q_row(in.q.begin() + static_cast<std::ptrdiff_t>((head * sh.n_q + i) * d),
                                     in.q.begin() + static_cast<std::ptrdiff_t>((head * sh.n_q + i + 1) * d));
    std::vector<std::uint32_t> keys(in.k.begin() + static_cast<std::ptrdiff_t>(kv * nk * d),
                                    in.k.begin() + static_cast<std::ptrdiff_t>((kv + 1) * nk * d));
    if (r.scores.qk_quant != nullptr) {
        q_row = mx_blocks(q_row.data(), d, *r.target.input, *r.scores.qk_quant, *r.target.input);
        for (std::uint64_t j = 0; j < nk; ++j) {
            const std::vector<std::uint32_t> kj =
                mx_blocks(keys.data() + j * d, d, *r.target.input, *r.scores.qk_quant, *r.target.input);
            std::copy(kj.begin(), kj.end(), keys.begin() + static_cast<std::ptrdiff_t>(j * d));
        }
    }
    const std::uint32_t* q = q_row.data();
    const std::uint32_t* k = keys.data();
    const std::uint32_t* v = in.v.data() + kv * nk * dv;
    // Each key's mask: -inf outside the band or where the value masks it, else the value b; the
    // score in exp2's units is RN(s c), or RN(RN(s c) + RN(RN_f32(b) log2 e)) where b is not 0.
    const auto [band_begin, band_end] = mask.band(i);
    std::vector<float> bias(nk, emu::steps::minus_infinity());
    for (std::uint64_t j = band_begin; j < band_end; ++j) {
        const auto b = static_cast<float>(mask.value(head, i, j));
        bias[j] = b == 0.0f || b == emu::steps::minus_infinity() ? b : a::mul(b, emu::steps::log2e);
    }
    auto seen = [&](std::uint64_t j) { return bias[j] != emu::steps::minus_infinity(); };
    // The constant c, and the row's state: max m (log2 units), raw max, sum l or four lanes' sums.
    // under a soft cap (FlashAttention-2's): the score tanh(RN(s RN(scale / cap))), the constant RN(cap log2 e)
    const emu::SoftcapConstants cap = emu::softcap_constants(sh.scale, static_cast<float>(sh.softcap));
    // scale-first (the memory-efficient kernel): s scale rounded first, then times RN(log2 e)
    const bool scale_first = r.scores.scale_log2 == emu::ScaleLog2::scale_first;
    const float scale_log2 = sh.softcap != 0 ? cap.scale_log2
                             : scale_first   ? emu::steps::log2e
                             : r.scores.scale_log2 == emu::ScaleLog2::float64
                                 ? static_cast<float>(static_cast<double>(sh.scale) * 1.4426950408889634074)
                                 : emu::steps::scale_log2(sh.scale);
    const bool quad = r.softmax.row_sum == emu::RowSum::quad_ffma,
               cudnn_lanes = r.softmax.row_sum == emu::RowSum::cudnn,
               lane_tile = r.softmax.row_sum == emu::RowSum::lane_tile || cudnn_lanes;
    const int offset = r.softmax.max_offset;  // P-bar against the max less k: in [0, 2^k]
    const float two_k = std::ldexp(1.0f, offset);
    float m = emu::steps::minus_infinity(), m_raw = emu::steps::minus_infinity(), l = 0;
    float lanes[4] = {0, 0, 0, 0};
    std::vector<std::uint32_t> acc(dv, 0);
    std::vector<std::uint64_t> starts;
    const auto block_n = static_cast<std::uint64_t>(emu::resolved_block_n(r, d));
    for (std::uint64_t c0 = 0; c0 < nk; c0 += block_n) starts.push_back(c0);
    if (r.tiles.kv_order == emu::KvOrder::reverse) std::reverse(starts.begin(), starts.end());
    // the tiles the kernel skips: outside the band of every row of the row block
    const auto bm = static_cast<std::uint64_t>(r.tiles.block_m);
    const std::uint64_t block_first = i / bm * bm, block_last = std::min<std::uint64_t>(block_first + bm, sh.n_q) - 1;
    for (const std::uint64_t c0 : starts) {
        const std::uint64_t c1 = std::min<std::uint64_t>(c0 + block_n, nk);
        if (c0 >= mask.band(block_last).second || c1 <= mask.band(block_first).first) continue;
        std::vector<float> t(c1 - c0), raw(c1 - c0);
        float block_max = emu::steps::minus_infinity(), raw_max = emu::steps::minus_infinity();
        for (std::uint64_t j = c0; j < c1; ++j) {
            std::vector<std::uint32_t> kj(k + j * d, k + (j + 1) * d);
            const float product = float_from_bits(score(q, kj.data(), 1, static_cast<int>(d), 0));
            const float s = sh.softcap != 0 ? emu::tanh_rn(a::mul(product, cap.score_factor))
                            : scale_first   ? a::mul(product, sh.scale)
                                            : product;
            raw[j - c0] = s;
            const float sc = a::mul(s, scale_log2);
            t[j - c0] = !seen(j) ? emu::steps::minus_infinity() : bias[j] == 0.0f ? sc : a::add(sc, bias[j]);
            block_max = std::max(block_max, t[j - c0]);
            if (seen(j)) raw_max = std::max(raw_max, s);
        }
        const float m_new = std::max(m, block_max), m_raw_new = std::max(m_raw, raw_max);
        float factor = emu::steps::rescale(m, m_new, r.softmax.exp2);
        if (r.softmax.rescale_arg == emu::RescaleArg::raw)  // exp2(RN(RN(m_old - m_new) c)), the raw maxima
            factor = m_raw == emu::steps::minus_infinity()
                         ? 0.0f
                         : emu::exp2_of(a::mul(a::sub(m_raw, emu::steps::usable_max(m_raw_new)), scale_log2),
                                        r.softmax.exp2);
        // FlashAttention-3's max_scaled under an offset: m c - k (one fma from the raw max where
        // exp2's argument is an fma), 0 while the row has no key
        float m_arg = emu::steps::usable_max(m_new);
        if (offset != 0 && m_new != emu::steps::minus_infinity())
            m_arg = r.softmax.exp2_arg == emu::Exp2Arg::fma ? a::fma(m_raw_new, scale_log2, -static_cast<float>(offset))
                                                            : a::sub(m_new, static_cast<float>(offset));
        float sum = 0;
        std::vector<float> pbar(c1 - c0);
        std::vector<std::uint32_t> p(c1 - c0);
        for (std::uint64_t j = 0; j < c1 - c0; ++j) {
            // P-bar = exp2(RN(t - m)), or with s c - m in one rounding; a masked key's t is -inf
            pbar[j] = r.softmax.exp2_arg == emu::Exp2Arg::fma && seen(c0 + j) && bias[c0 + j] == 0.0f
                          ? emu::exp2_of(a::fma(raw[j], scale_log2, -m_arg), r.softmax.exp2)
                          : emu::exp2_of(a::sub(t[j], m_arg), r.softmax.exp2);
            if (!seen(c0 + j)) pbar[j] = 0.0f;
            sum = a::add(sum, pbar[j]);
            p[j] = emu::steps::cast_p(pbar[j], r.p_and_v.p_scale,
                                      r.p_and_v.p_quant != nullptr ? f32 : *r.p_and_v.p_format);
        }
        if (r.p_and_v.p_quant != nullptr)
            p = mx_blocks(p.data(), p.size(), f32, *r.p_and_v.p_quant, *r.p_and_v.p_format);  // P * S
        if (quad) {  // lane u: keys 2u, 2u + 1, 2u + 8, 2u + 9, ...; its first fused with the rescale
            for (std::uint64_t u = 0; u < 4; ++u) {
                lanes[u] = a::fma(lanes[u], factor, 2 * u < c1 - c0 ? pbar[2 * u] : 0.0f);
                for (std::uint64_t j = 2 * u + 1; j < c1 - c0; j += (j % 2 == 0 ? 1 : 7))
                    lanes[u] = a::add(lanes[u], pbar[j]);
            }
            l = a::add(a::add(lanes[0], lanes[2]), a::add(lanes[1], lanes[3]));
        } else if (lane_tile) {  // lane u sums its keys of the tile in order, then fma(lane, factor, that)
            for (std::uint64_t u = 0; u < 4; ++u) {
                float tile_sum = 0;
                bool first = true;
                for (std::uint64_t j = 2 * u; j < c1 - c0; j += (j % 2 == 0 ? 1 : 7)) {
                    tile_sum = first ? pbar[j] : a::add(tile_sum, pbar[j]);
                    first = false;
                }
                lanes[u] = a::fma(lanes[u], factor, tile_sum);
            }
            // joined by offsets 2 then 1 (FlashAttention-3), or 1 then 2 (cuDNN)
            l = cudnn_lanes ? a::add(a::add(lanes[0], lanes[1]), a::add(lanes[2], lanes[3]))
                            : a::add(a::add(lanes[0], lanes[2]), a::add(lanes[1], lanes[3]));
        } else if (r.softmax.row_sum == emu::RowSum::mem_eff) {
            // warp w holds keys [32 w, 32 w + 32) of the tile; its lane u sums those with (j mod 8) / 2
            // = u from zero; the quad joins (r_0 + r_1) + (r_2 + r_3); l alpha, then the warps in order
            l = a::mul(l, factor);
            for (std::uint64_t w = 0; 32 * w < c1 - c0; ++w) {
                float r4[4] = {0, 0, 0, 0};
                for (std::uint64_t j = 32 * w; j < std::min<std::uint64_t>(32 * w + 32, c1 - c0); ++j)
                    r4[(j % 8) / 2] = a::add(r4[(j % 8) / 2], pbar[j]);
                l = a::add(l, a::add(a::add(r4[0], r4[1]), a::add(r4[2], r4[3])));
            }
        } else {
            l = a::add(a::mul(l, factor), sum);
        }
        m = m_new, m_raw = m_raw_new;
        for (std::uint64_t c = 0; c < dv; ++c) {
            const std::uint32_t scaled = bits_of(a::mul(float_from_bits(acc[c]), factor));
            if (*r.output.accumulator == f32) {
                acc[c] = pv(p.data(), v + c0 * dv + c, static_cast<long>(dv), static_cast<int>(c1 - c0), scaled);
            } else {  // the running O rounded to its format after each operation
                const std::uint32_t product =
                    pv(p.data(), v + c0 * dv + c, static_cast<long>(dv), static_cast<int>(c1 - c0), 0);
                auto round = [&](double x) {
                    return emu::decode(*r.output.accumulator,
                                       emu::cast_from_f64(x, *r.output.accumulator, emu::CastOptions{}));
                };
                acc[c] = bits_of(
                    static_cast<float>(round(round(float_from_bits(scaled)) + round(float_from_bits(product)))));
            }
        }
    }
    const bool torch = r.output.epilogue == emu::Epilogue::torch_flash, empty = !(l > 0.0f);
    const bool cudnn = r.output.epilogue == emu::Epilogue::cudnn;
    const bool fa3 = r.output.epilogue == emu::Epilogue::fa3 || cudnn;  // cuDNN's O is FlashAttention-3's
    const float lse_torch = empty ? INFINITY : a::fma(m_raw, sh.scale, emu::cuda_logf(l));
    const float l_unscaled = a::div(l, two_k);  // exact: a power of two
    const float log_l = a::mul(emu::h100_lg2_ftz(l_unscaled), emu::steps::ln2);
    const float lse_fa3 = empty   ? emu::steps::minus_infinity()
                          : cudnn ? a::fma(m, emu::steps::ln2, log_l)  // from the scaled max RN(m c)
                                  : a::fma(m_raw, a::mul(scale_log2, emu::steps::ln2), log_l);
    // the memory-efficient kernel's: RN(m / RN(log2 e)) + libdevice's logf(l); 1/l with l 0 taken as 1
    const bool mem_eff = r.output.epilogue == emu::Epilogue::mem_eff;
    const float lse_mem_eff = a::add(a::div(m, emu::steps::log2e), emu::libdevice_logf(l));
    RowResult out{std::vector<std::uint32_t>(dv), torch     ? a::mul(lse_torch, emu::steps::log2e)
                                                  : fa3     ? a::mul(lse_fa3, emu::steps::log2e)
                                                  : mem_eff ? a::mul(lse_mem_eff, emu::steps::log2e)
                                                            : emu::steps::lse_log2(m, l_unscaled)};
    const float factor = torch     ? (empty ? 1.0f : a::div(1.0f, l))
                         : fa3     ? (empty ? 0.0f : emu::h100_rcp_ftz(l))
                         : mem_eff ? a::div(1.0f, l == 0.0f ? 1.0f : l)
                                   : emu::steps::output_factor(l, r.p_and_v.p_scale);
    emu::CastOptions o;
    o.saturate = true;
    for (std::uint64_t c = 0; c < dv; ++c)
        out.o[c] = static_cast<std::uint32_t>(
            emu::cast_from_f32(a::mul(float_from_bits(acc[c]), factor), *r.output.format, o));
    return out;
}

inline RowResult scalar_online_row(const emu::AttentionRecipe& r, const emu::AttentionShape& sh,
                                   const emu::AttentionOperands& in, std::uint64_t head, std::uint64_t i) {
    return scalar_online_row(r, sh, in, head, i, causal_mask(sh));
}

/// Rows whose O bits or LSE bits differ between the tiled emulator's `f` and the scalar rows.
inline std::uint64_t scalar_mismatches(const emu::AttentionRecipe& r, const emu::AttentionShape& sh,
                                       const emu::AttentionOperands& in, const emu::ForwardResult& f,
                                       const RowMask& mask) {
    std::uint64_t mismatches = 0;
    for (std::uint64_t head = 0; head < sh.heads; ++head) {
        for (std::uint64_t i = 0; i < sh.n_q; ++i) {
            const RowResult row = scalar_online_row(r, sh, in, head, i, mask);
            const std::uint64_t at = (head * sh.n_q + i) * sh.d_v;
            if (!std::equal(row.o.begin(), row.o.end(), f.o.begin() + static_cast<std::ptrdiff_t>(at))) ++mismatches;
            if (bits_of(row.lse2) != bits_of(f.lse_log2[head * sh.n_q + i])) ++mismatches;
        }
    }
    return mismatches;
}

inline std::uint64_t scalar_mismatches(const emu::AttentionRecipe& r, const emu::AttentionShape& sh,
                                       const emu::AttentionOperands& in, const emu::ForwardResult& f) {
    return scalar_mismatches(r, sh, in, f, causal_mask(sh));
}

}  // namespace roundscope::test
