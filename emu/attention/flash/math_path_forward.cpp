#include "emu/attention/flash/math_path_forward.hpp"

#include <vector>

#include "emu/attention/flash/math_path_operands.hpp"
#include "emu/attention/flash/tile_product.hpp"
#include "emu/numbers/f32_arith.hpp"
#include "emu/numbers/round.hpp"

namespace roundscope::emu::detail {

namespace a = f32_arith;

void math_path_rows(const FlashContext& ctx, const MathPathRow& row_rule, const std::uint32_t* q,
                    const std::uint32_t* k, const std::uint32_t* v, std::uint64_t head, Span rows, ForwardResult& out,
                    std::uint64_t skip_keys) {
    constexpr float minus_inf = -__builtin_huge_valf();
    const AttentionRecipe& r = ctx.recipe;
    const AttentionShape& sh = ctx.shape;
    const Format& input = *r.target.input;
    const std::uint64_t nk = sh.n_kv, d = sh.d, dv = sh.d_v, n = rows.size();
    const float root = math_path_root_scale(sh);
    const std::vector<std::uint32_t> qs = math_path_scaled(q + rows.begin * d, n * d, input, root);
    const std::vector<std::uint32_t> ks = math_path_scaled(k, nk * d, input, root);
    const std::vector<std::uint32_t> vs = math_path_scaled(v, nk * dv, input, 1.0f);  // the upcast
    std::vector<std::uint32_t> s(n * nk);
    TileProduct(r, f32, f32, r.scores.product)
        .run(qs.data(), transposed(ks.data(), nk, d, {0, d}).data(), nullptr, s.data(), n, nk, d);
    const std::vector<float> mask = ctx.tile_mask(head, rows, {0, nk});  // natural units; empty: none
    const steps::PCastConstants one(1.0f, f32);
    std::vector<std::uint32_t> p_bits(n * nk, 0);
    std::vector<float> x(nk), p(nk);
    for (std::uint64_t row = 0; row < n; ++row) {
        const std::uint64_t visible = ctx.visible(rows.begin + row);
        for (std::uint64_t j = 0; j < nk; ++j) {
            const float b = mask.empty() ? 0.0f : mask[row * nk + j];
            x[j] = j >= visible ? minus_inf : a::add(float_from_bits(s[row * nk + j]), b);
        }
        float m = 0, l = 0;
        const bool any = row_rule.softmax(x, nk, p, m, l);
        ForwardCounts& counts = out.row_counts[head * sh.n_q + rows.begin + row];
        counts = ForwardCounts{.skip_keys = skip_keys};
        for (std::uint64_t j = 0; j < nk && any; ++j) {
            p_bits[row * nk + j] = bits_of(p[j]);
            if (x[j] != minus_inf) steps::count_p(p[j], 1.0f, bits_of(p[j]), f32, j, counts, one);
        }
        const std::uint64_t i = head * sh.n_q + rows.begin + row;
        out.lse[i] = any ? a::add(m, row_rule.logf(l)) : minus_inf;
        out.lse_log2[i] = a::mul(out.lse[i], steps::log2e);
    }
    std::vector<std::uint32_t> o(n * dv);
    TileProduct(r, f32, f32, r.p_and_v.product).run(p_bits.data(), vs.data(), nullptr, o.data(), n, dv, nk);
    for (std::uint64_t e = 0; e < n * dv; ++e) {
        const float value = float_from_bits(o[e]);
        out.o_f32[rows.begin * dv + head * sh.n_q * dv + e] = value;
        out.o[rows.begin * dv + head * sh.n_q * dv + e] =
            static_cast<std::uint32_t>(cast_from_f32(value, *r.output.format, CastOptions{}));
    }
}

}  // namespace roundscope::emu::detail
