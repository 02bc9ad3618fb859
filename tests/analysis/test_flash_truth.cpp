// The flash-attention emulator against the ground truth: every output of every preset lies
// within the error its recipe's roundings allow (BF16: O to 2^-8 relative, as its final cast
// allows; FP8: to 2^-5, from E4M3 P), causal and not, forward and backward.
#include <catch2/catch.hpp>

#include <cmath>

#include "analysis/truth/attention_truth.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/batch/tensor_cast.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

Tensor tensor_of(const char* name, const Format& f, Shape shape, const std::vector<std::uint32_t>& bits) {
    Tensor t = Tensor::zeros(name, dtype_of(f), std::move(shape));
    for (std::size_t i = 0; i < bits.size(); ++i) t.set_bits_at(i, bits[i]);
    return t;
}

// The operands as attention inputs ([H, N, D] tensors in the recipe's input format, with dO).
emu::AttentionInputs inputs_of(const AttentionRecipe& r, const AttentionShape& sh, const AttentionOperands& in) {
    const std::uint64_t h = sh.heads, nq = sh.n_q, nk = sh.n_kv, d = sh.d;
    emu::AttentionInputs ai{.q = tensor_of("q", *r.target.input, {h, nq, d}, in.q),
                            .k = tensor_of("k", *r.target.input, {h, nk, d}, in.k),
                            .v = tensor_of("v", *r.target.input, {h, nk, sh.d_v}, in.v)};
    ai.d_o = tensor_of("do", *r.target.input, {h, nq, sh.d_v}, in.d_o);
    ai.heads = h, ai.n_q = nq, ai.n_kv = nk, ai.d = d, ai.d_v = sh.d_v;
    return ai;
}

// sqrt(sum (x - truth)^2 / sum truth^2) over a tensor, x decoded from `f`.
double relative_rms(const std::vector<std::uint32_t>& x, const Format& f, const std::vector<double>& truth) {
    double error = 0, norm = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double e = decode(f, x[i]) - truth[i];
        error += e * e, norm += truth[i] * truth[i];
    }
    return std::sqrt(error / norm);
}

}  // namespace

TEST_CASE("Emulated attention lies within its recipe's rounding error of the ground truth", "[flash][truth]") {
    struct Expect {
        const char* recipe;
        double o, grads;  // relative rms error bounds
        double lse;       // absolute: float32 (2^-21 of LSEs near 8), or the FP8 wgmma's 14-bit scores
    };
    const Expect e =
        GENERATE(Expect{"fa2-bf16", 0x1p-8, 0x1p-7, 0x1p-16}, Expect{"fa3-bf16", 0x1p-8, 0x1p-7, 0x1p-16},
                 Expect{"fa3-fp8", 0x1p-5, 0x1p-7, 0x1p-10}, Expect{"fa2-bf16-max-adjust", 0x1p-8, 0x1p-7, 0x1p-16});
    const bool causal = GENERATE(false, true);
    const AttentionRecipe r = find_recipe(e.recipe);
    const AttentionShape sh = emu::attention_shape(2, 100, 120, 64, causal);
    const AttentionOperands in = emu::random_operands(sh, *r.target.input, 51);
    const ForwardResult f = flash_forward(r, sh, in);
    const BackwardResult b = flash_backward(r, sh, in, f);

    const emu::AttentionInputs ai = inputs_of(r, sh, in);
    analysis::TruthOptions o;
    o.causal = causal;
    o.scale = sh.scale;
    o.backward = true;
    const analysis::AttentionTruth t = analysis::attention_truth(ai, o);
    INFO(e.recipe << " causal " << causal);
    CHECK(relative_rms(f.o, *r.output.format, t.o) <= e.o);
    double lse_error = 0;
    for (std::size_t i = 0; i < t.lse.size(); ++i)
        lse_error = std::max(lse_error, std::fabs(static_cast<double>(f.lse[i]) - t.lse[i]));
    CHECK(lse_error <= e.lse);
    CHECK(relative_rms(b.dq, *r.backward.grad_format, t.dq) <= e.grads);
    CHECK(relative_rms(b.dk, *r.backward.grad_format, t.dk) <= e.grads);
    CHECK(relative_rms(b.dv, *r.backward.grad_format, t.dv) <= e.grads);
}

TEST_CASE("Soft-capped attention, forward and backward, lies within its recipe's rounding of the capped truth",
          "[flash][truth][softcap]") {
    const AttentionRecipe r = find_recipe("fa2-bf16");
    AttentionShape sh = emu::attention_shape(2, 40, 56, 32, true);
    sh.softcap = 3;  // scores spread over about +-6: the cap bites
    const AttentionOperands in = emu::random_operands(sh, *r.target.input, 13, 3.0);
    const ForwardResult f = flash_forward(r, sh, in);
    const BackwardResult b = flash_backward(r, sh, in, f);
    emu::AttentionInputs ai = inputs_of(r, sh, in);
    analysis::TruthOptions o;
    o.causal = true, o.scale = sh.scale, o.backward = true;
    ai.softcap = 3;
    const analysis::AttentionTruth capped = analysis::attention_truth(ai, o);
    ai.softcap = 0;
    const analysis::AttentionTruth uncapped = analysis::attention_truth(ai, o);
    CHECK(relative_rms(f.o, *r.output.format, capped.o) <= 0x1p-8);
    for (const auto& [name, bits, truth] : {std::tuple{"dq", &b.dq, &capped.dq}, std::tuple{"dk", &b.dk, &capped.dk},
                                            std::tuple{"dv", &b.dv, &capped.dv}}) {
        INFO(name);
        CHECK(relative_rms(*bits, *r.backward.grad_format, *truth) <= 0x1p-7);
    }
    // and the cap is seen: the uncapped problem is far off
    CHECK(relative_rms(f.o, *r.output.format, uncapped.o) > 0x1p-5);
    CHECK(relative_rms(b.dq, *r.backward.grad_format, uncapped.dq) > 0x1p-5);
}
