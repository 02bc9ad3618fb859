#include "emu/attention/flash/cuda_math_forward.hpp"

#include <array>
#include <cmath>
#include <vector>

#include "emu/attention/flash/math_path_operands.hpp"
#include "emu/attention/flash/tile_product.hpp"
#include "emu/attention/math/libdevice_math.hpp"
#include "emu/numbers/f32_arith.hpp"
#include "emu/numbers/round.hpp"
#include "emu/numbers/unpack.hpp"

namespace roundscope::emu::detail {

namespace a = f32_arith;

namespace {

// softmax_warp_forward's lanes: the row padded to a power of two, over min(that, 32) lanes.
int warp_lanes(std::uint64_t n_kv) {
    std::uint64_t pow2 = 1;
    while (pow2 < n_kv) pow2 *= 2;
    return static_cast<int>(pow2 < 32 ? pow2 : 32);
}

// One row's softmax as softmax_warp_forward computes it, x its n scores (masked ones -inf):
// p into `p`, m and l into the arguments; false for a row of -inf only (_safe_softmax's zeros).
bool warp_softmax(const std::vector<float>& x, std::uint64_t n, int lanes, std::vector<float>& p, float& m, float& l) {
    constexpr float minus_inf = -__builtin_huge_valf();
    std::array<float, 32> lane_max{}, lane_sum{};
    const auto iterations = (n + static_cast<std::uint64_t>(lanes) - 1) / static_cast<std::uint64_t>(lanes);
    for (int lane = 0; lane < lanes; ++lane) {
        float mx = minus_inf;  // the elements past n are -inf
        for (std::uint64_t it = 0; it < iterations; ++it) {
            const std::uint64_t j = it * static_cast<std::uint64_t>(lanes) + static_cast<std::uint64_t>(lane);
            const float e = j < n ? x[j] : minus_inf;
            mx = it == 0 ? e : (mx > e ? mx : e);
        }
        lane_max[lane] = mx;
    }
    for (int offset = lanes / 2; offset > 0; offset /= 2) {
        std::array<float, 32> next{};
        for (int lane = 0; lane < lanes; ++lane) {
            const float b = lane_max[lane ^ offset];
            next[lane] = lane_max[lane] < b ? b : lane_max[lane];
        }
        lane_max = next;
    }
    m = lane_max[0];
    bool any = false;
    for (std::uint64_t j = 0; j < n; ++j) any = any || x[j] != minus_inf;
    if (!any) return false;
    for (int lane = 0; lane < lanes; ++lane) {
        float sum = 0.0f;
        for (std::uint64_t j = static_cast<std::uint64_t>(lane); j < n; j += static_cast<std::uint64_t>(lanes)) {
            p[j] = libdevice_expf(a::sub(x[j], m));
            sum = a::add(sum, p[j]);
        }
        lane_sum[lane] = sum;
    }
    for (int offset = lanes / 2; offset > 0; offset /= 2) {
        std::array<float, 32> next{};
        for (int lane = 0; lane < lanes; ++lane) next[lane] = a::add(lane_sum[lane], lane_sum[lane ^ offset]);
        lane_sum = next;
    }
    l = lane_sum[0];
    for (std::uint64_t j = 0; j < n; ++j) p[j] = a::div(p[j], l);
    return true;
}

}  // namespace

void cuda_math_rows(const FlashContext& ctx, const std::uint32_t* q, const std::uint32_t* k, const std::uint32_t* v,
                    std::uint64_t head, Span rows, ForwardResult& out, std::uint64_t skip_keys) {
    const AttentionRecipe& r = ctx.recipe;
    const AttentionShape& sh = ctx.shape;
    const Format& input = *r.target.input;
    const std::uint64_t nk = sh.n_kv, d = sh.d, dv = sh.d_v, n = rows.size();
    const float root = math_path_root_scale(sh);
    const std::vector<std::uint32_t> qs = math_path_scaled(q + rows.begin * d, n * d, input, root);
    const std::vector<std::uint32_t> ks = math_path_scaled(k, nk * d, input, root);
    std::vector<std::uint32_t> s(n * nk);
    TileProduct(r, f32, f32, r.scores.product)
        .run(qs.data(), transposed(ks.data(), nk, d, {0, d}).data(), nullptr, s.data(), n, nk, d);
    const std::vector<float> mask = ctx.tile_mask(head, rows, {0, nk});  // natural units; empty: none
    const int lanes = warp_lanes(nk);
    const steps::PCastConstants one(1.0f, f32);
    std::vector<std::uint32_t> p_bits(n * nk, 0);
    std::vector<float> x(nk), p(nk);
    for (std::uint64_t row = 0; row < n; ++row) {
        const std::uint64_t visible = ctx.visible(rows.begin + row);
        for (std::uint64_t j = 0; j < nk; ++j) {
            const float b = mask.empty() ? 0.0f : mask[row * nk + j];
            x[j] = j >= visible ? -__builtin_huge_valf() : a::add(float_from_bits(s[row * nk + j]), b);
        }
        float m = 0, l = 0;
        const bool any = warp_softmax(x, nk, lanes, p, m, l);
        ForwardCounts& counts = out.row_counts[head * sh.n_q + rows.begin + row];
        counts = ForwardCounts{.skip_keys = skip_keys};
        for (std::uint64_t j = 0; j < nk && any; ++j) {
            p_bits[row * nk + j] = bits_of(p[j]);
            if (x[j] != -__builtin_huge_valf()) steps::count_p(p[j], 1.0f, bits_of(p[j]), f32, j, counts, one);
        }
        const std::uint64_t i = head * sh.n_q + rows.begin + row;
        out.lse[i] = any ? a::add(m, libdevice_logf(l)) : -__builtin_huge_valf();
        out.lse_log2[i] = a::mul(out.lse[i], steps::log2e);
    }
    std::vector<std::uint32_t> o(n * dv);
    TileProduct(r, f32, input, r.p_and_v.product).run(p_bits.data(), v, nullptr, o.data(), n, dv, nk);
    for (std::uint64_t e = 0; e < n * dv; ++e) {
        const float value = float_from_bits(o[e]);
        out.o_f32[rows.begin * dv + head * sh.n_q * dv + e] = value;
        out.o[rows.begin * dv + head * sh.n_q * dv + e] =
            static_cast<std::uint32_t>(cast_from_f32(value, *r.output.format, CastOptions{}));
    }
}

}  // namespace roundscope::emu::detail
