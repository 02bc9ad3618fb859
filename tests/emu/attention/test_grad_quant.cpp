// The quantized backward (recipe keys grad_quant, grad_rounding, grad_seed): with nearest-even
// elements, dQ, dK, dV and delta equal a dense reference written from the definition (every
// operand of each gradient product block-quantized along that product's sum by mx_block.hpp's
// scalar path, one element of each product at a time through the tensor-core model), bit for
// bit; a reference that quantizes along the wrong axis does not. Stochastic rounding is
// reproducible on any thread count, changes with the seed, and is unbiased: the mean of many
// seeds' gradients lies closer to the unquantized ones than nearest-even's.
#include <catch2/catch.hpp>

#include <cmath>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_context.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/block/block_format.hpp"
#include "emu/block/mx_block.hpp"
#include "emu/mma/fused_dot_add.hpp"
#include "emu/mma/mma_model.hpp"

#include "tests/emu/attention/mx_reference.hpp"
using namespace roundscope;
using namespace roundscope::emu;

namespace {

// x[0], x[stride], ... (n values, bits of f) through MX blocks of 32 from the first, nearest-even
// elements, dequantized into f: written back in place.
void mx_in_place(std::uint32_t* x, std::size_t n, std::size_t stride, const Format& f, const BlockFormat& b) {
    const std::vector<std::uint32_t> q = test::mx_blocks(x, n, stride, f, b, f);
    for (std::size_t t = 0; t < n; ++t) x[t * stride] = q[t];
}

// A [rows][cols] matrix quantized along its rows (each column) or its columns (each row).
std::vector<std::uint32_t> along(std::vector<std::uint32_t> x, std::size_t rows, std::size_t cols, bool along_rows,
                                 const Format& f, const BlockFormat& b) {
    if (along_rows)
        for (std::size_t c = 0; c < cols; ++c) mx_in_place(x.data() + c, rows, cols, f, b);
    else
        for (std::size_t r = 0; r < rows; ++r) mx_in_place(x.data() + r * cols, cols, 1, f, b);
    return x;
}

struct Gradients {
    std::vector<std::uint32_t> dq, dk, dv;
};

// The backward of one head written from the definition, with nearest-even MX blocks. `wrong`:
// P quantized along the keys for dV (the wrong axis), the negative control.
Gradients reference(const AttentionRecipe& r, const AttentionShape& sh, const AttentionOperands& in,
                    const ForwardResult& f, const BlockFormat& b, bool wrong = false) {
    const FlashContext ctx = flash_context(r, sh);
    const Format& g = *r.backward.ds_format;
    const MmaModel& score = *find_mma_model(r.target.arch, r.target.instruction, *r.target.input, *r.target.input, f32);
    const MmaModel& grad = *find_mma_model(r.target.arch, r.target.instruction, g, g, f32);
    const std::size_t nq = sh.n_q, nk = sh.n_kv, d = sh.d, dv = sh.d_v;
    const std::vector<std::uint32_t> qg = exact_in(in.q, *r.target.input, g, "q"),
                                     kg = exact_in(in.k, *r.target.input, g, "k");
    const std::vector<std::uint32_t> vg = exact_in(in.v, *r.target.input, g, "v"),
                                     dog = exact_in(in.d_o, *r.target.input, g, "do");
    const std::vector<std::uint32_t> do_d = along(dog, nq, dv, false, g, b), v_d = along(vg, nk, dv, false, g, b);
    const std::vector<std::uint32_t> do_rows = along(dog, nq, dv, true, g, b), q_rows = along(qg, nq, d, true, g, b);
    const std::vector<std::uint32_t> k_keys = along(kg, nk, d, true, g, b);
    std::vector<std::uint32_t> p(nq * nk), ds(nq * nk);
    for (std::size_t i = 0; i < nq; ++i) {
        const float delta =
            recipe_delta_row(r, in.d_o.data() + i * dv, f.o.data() + i * dv, *r.output.format, static_cast<int>(dv));
        for (std::size_t j = 0; j < nk; ++j) {
            const std::uint32_t s = mma_dot(score, in.q.data() + i * d, in.k.data() + j * d, 1, static_cast<int>(d), 0);
            const std::uint32_t dp =
                mma_dot(grad, do_d.data() + i * dv, v_d.data() + j * dv, 1, static_cast<int>(dv), 0);
            const steps::BackwardElement e = steps::backward_element(s, dp, j < ctx.visible(i), f.lse_log2[i], delta,
                                                                     ctx.scale_log2, ctx.exp2, g, r.softmax.exp2_arg);
            p[i * nk + j] = e.p_cast, ds[i * nk + j] = e.ds_cast;
        }
    }
    const std::vector<std::uint32_t> p_rows = along(p, nq, nk, !wrong, g, b), ds_rows = along(ds, nq, nk, true, g, b);
    const std::vector<std::uint32_t> ds_keys = along(ds, nq, nk, false, g, b);
    const std::vector<Span> row_blocks = blocks_of(nq, r.tiles.block_m), key_blocks = blocks_of(nk, r.tiles.block_n);
    // P and dS transposed (a key's column contiguous over the rows), for dV and dK
    std::vector<std::uint32_t> pt(nk * nq), dst(nk * nq);
    for (std::size_t i = 0; i < nq; ++i)
        for (std::size_t j = 0; j < nk; ++j) pt[j * nq + i] = p_rows[i * nk + j], dst[j * nq + i] = ds_rows[i * nk + j];
    Gradients out{std::vector<std::uint32_t>(nq * d), std::vector<std::uint32_t>(nk * d),
                  std::vector<std::uint32_t>(nk * dv)};
    for (const Span keys : key_blocks) {  // dV and dK: each key over the row blocks in order
        for (std::size_t j = keys.begin; j < keys.end; ++j) {
            for (std::size_t c = 0; c < dv; ++c) {
                std::uint32_t acc = 0;
                for (const Span rows : row_blocks)
                    if (!ctx.tile_masked(rows, keys))
                        acc = mma_dot(grad, pt.data() + j * nq + rows.begin, do_rows.data() + rows.begin * dv + c,
                                      static_cast<long>(dv), static_cast<int>(rows.size()), acc);
                out.dv[j * dv + c] = steps::gradient_bits(acc, 1.0f, *r.backward.grad_format);
            }
            for (std::size_t c = 0; c < d; ++c) {
                std::uint32_t acc = 0;
                for (const Span rows : row_blocks)
                    if (!ctx.tile_masked(rows, keys))
                        acc = mma_dot(grad, dst.data() + j * nq + rows.begin, q_rows.data() + rows.begin * d + c,
                                      static_cast<long>(d), static_cast<int>(rows.size()), acc);
                out.dk[j * d + c] = steps::gradient_bits(acc, static_cast<float>(sh.scale), *r.backward.grad_format);
            }
        }
    }
    for (const Span rows : row_blocks) {  // dQ: each row over the key blocks in order
        for (std::size_t i = rows.begin; i < rows.end; ++i) {
            for (std::size_t c = 0; c < d; ++c) {
                std::uint32_t acc = 0;
                for (const Span keys : key_blocks)
                    if (!ctx.tile_masked(rows, keys))
                        acc = mma_dot(grad, ds_keys.data() + i * nk + keys.begin, k_keys.data() + keys.begin * d + c,
                                      static_cast<long>(d), static_cast<int>(keys.size()), acc);
                out.dq[i * d + c] = steps::gradient_bits(acc, static_cast<float>(sh.scale), *r.backward.grad_format);
            }
        }
    }
    return out;
}

AttentionRecipe quantized(const char* format, const char* rounding = "nearest", int block = 32) {
    AttentionRecipe r = find_recipe("fa2-bf16");
    apply_setting(r, "block_m=" + std::to_string(block));
    apply_setting(r, "block_n=" + std::to_string(block));
    apply_setting(r, std::string("grad_quant=") + format);
    apply_setting(r, std::string("grad_rounding=") + rounding);
    return r;
}

AttentionOperands operands(const AttentionShape& sh, const AttentionRecipe& r) {
    AttentionOperands in = random_operands(sh, *r.target.input, 29, 2.0);
    in.d_o = random_operands(sh, *r.target.input, 31, 1.0).q;
    return in;
}

std::size_t differing(const std::vector<std::uint32_t>& x, const std::vector<std::uint32_t>& y) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < x.size(); ++i) n += x[i] != y[i];
    return n;
}

}  // namespace

TEST_CASE("grad_quant with nearest-even elements equals the dense reference bit for bit", "[flash][mx][grad_quant]") {
    for (const char* format : {"mxfp4", "mxfp8_e4m3"}) {
        for (const bool causal : {false, true}) {
            for (const int block : {32, 64}) {
                const AttentionRecipe r = quantized(format, "nearest", block);
                // 70 rows and 90 keys: partial blocks of rows and keys; D = 40: a block of 8 after 32
                const AttentionShape sh = attention_shape(1, 70, 90, 40, causal);
                const AttentionOperands in = operands(sh, r);
                const ForwardResult f = flash_forward(r, sh, in, 2);
                const BackwardResult b = flash_backward(r, sh, in, f, 2);
                const BlockFormat& bf = block_format_named(format);
                const Gradients ref = reference(r, sh, in, f, bf);
                INFO(format << " causal " << causal << " tiles " << block);
                CHECK(differing(b.dq, ref.dq) == 0);
                CHECK(differing(b.dk, ref.dk) == 0);
                CHECK(differing(b.dv, ref.dv) == 0);
                // the quantization shows, and the reference sees an axis taken wrongly
                const AttentionRecipe plain = find_recipe("fa2-bf16");
                CHECK(differing(b.dv, flash_backward(plain, sh, in, flash_forward(plain, sh, in, 2), 2).dv) > 100);
                CHECK(differing(b.dv, reference(r, sh, in, f, bf, true).dv) > 100);
            }
        }
    }
}

TEST_CASE("grad_quant's stochastic rounding: reproducible, seeded, unbiased", "[flash][mx][grad_quant]") {
    const AttentionShape sh = attention_shape(2, 64, 64, 32, true);
    const AttentionRecipe nearest = quantized("mxfp4");
    AttentionRecipe sr = quantized("mxfp4", "stochastic");
    const AttentionOperands in = operands(sh, sr);
    const ForwardResult f = flash_forward(sr, sh, in, 2);
    const BackwardResult one = flash_backward(sr, sh, in, f, 1), two = flash_backward(sr, sh, in, f, 2);
    CHECK((one.dq == two.dq && one.dk == two.dk && one.dv == two.dv));
    const BackwardResult rn = flash_backward(nearest, sh, in, f, 2);
    CHECK(differing(one.dv, rn.dv) > 100);
    apply_setting(sr, "grad_seed=1");
    CHECK(differing(one.dv, flash_backward(sr, sh, in, f, 2).dv) > 100);
    // unbiased but for the blocks' saturation (the floor scale rule clips the largest elements,
    // which no rounding undoes): the mean over 48 seeds of dK lies nearer the unquantized dK than
    // one seed's, by the averaged noise, and nearer than nearest-even's
    const AttentionRecipe plain = find_recipe("fa2-bf16");
    const BackwardResult exact = flash_backward(plain, sh, in, flash_forward(plain, sh, in, 2), 2);
    auto rms_error = [&](const std::vector<double>& x) {
        double e = 0;
        for (std::size_t i = 0; i < x.size(); ++i)
            e += (x[i] - decode(bf16, exact.dk[i])) * (x[i] - decode(bf16, exact.dk[i]));
        return std::sqrt(e / static_cast<double>(x.size()));
    };
    auto values = [](const std::vector<std::uint32_t>& bits) {
        std::vector<double> v(bits.size());
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = decode(bf16, bits[i]);
        return v;
    };
    std::vector<double> mean(exact.dk.size(), 0);
    const int seeds = 48;
    for (int seed = 0; seed < seeds; ++seed) {
        apply_setting(sr, "grad_seed=" + std::to_string(seed));
        const std::vector<double> b = values(flash_backward(sr, sh, in, f, 2).dk);
        for (std::size_t i = 0; i < mean.size(); ++i) mean[i] += b[i] / seeds;
    }
    const double e_mean = rms_error(mean), e_one = rms_error(values(one.dk)), e_rn = rms_error(values(rn.dk));
    INFO("rms error of dK: one seed " << e_one << ", the mean of " << seeds << " seeds " << e_mean << ", nearest-even "
                                      << e_rn);
    CHECK(e_mean < 0.5 * e_one);
    CHECK(e_mean < e_rn);
}

TEST_CASE("grad_quant refuses what it cannot run", "[flash][mx][grad_quant]") {
    AttentionRecipe r = find_recipe("fa2-bf16");
    apply_setting(r, "grad_quant=mxfp4");
    apply_setting(r, "block_m=48");
    CHECK_THROWS_WITH(validate(r), Catch::Contains("grad_quant"));
    AttentionRecipe s = find_recipe("fa2-bf16");
    apply_setting(s, "grad_rounding=stochastic");
    CHECK_THROWS_WITH(validate(s), Catch::Contains("grad_rounding"));
    CHECK_THROWS_WITH(apply_setting(s, "grad_quant=mxfp3"), Catch::Contains("grad_quant"));
}
