// What compare_kernel_head (analysis/kernel_compare.hpp) takes for granted: the first query head
// of a key-value group, run within its group's run, has the bits of the head run alone (O, LSE,
// delta and dQ), for every preset, causal or not; so the compare takes the head's outputs from
// the group's run instead of running the head again.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "analysis/attention_run.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/inputs/head_inputs.hpp"
#include "emu/numbers/round.hpp"
#include "lib/error.hpp"

using namespace roundscope;
using namespace roundscope::analysis;

namespace {

Tensor random_bf16(const std::string& name, Shape shape, std::mt19937_64& rng, double sd) {
    Tensor t = Tensor::zeros(name, DType::bf16, std::move(shape));
    std::normal_distribution<double> g(0, sd);
    for (std::uint64_t i = 0; i < t.size(); ++i) t.set_bits_at(i, emu::cast_from_f64(g(rng), emu::bf16, {}));
    return t;
}

// 6 query heads over 2 key-value heads (groups of 3), 70 queries, 90 keys, D = 64, with dO.
emu::AttentionInputs grouped_inputs() {
    std::mt19937_64 rng(2026);
    emu::AttentionInputs in;
    in.heads = 6, in.kv_heads = 2;
    in.n_q = 70, in.n_kv = 90, in.d = 64, in.d_v = 64;
    in.q = random_bf16("q", {6, 70, 64}, rng, 2.0);
    in.k = random_bf16("k", {2, 90, 64}, rng, 2.0);
    in.v = random_bf16("v", {2, 90, 64}, rng, 1.0);
    in.d_o = random_bf16("do", {6, 70, 64}, rng, 1.0);
    return in;
}

template <class T>
std::vector<T> first(const std::vector<T>& v, std::size_t n) {
    return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(n, v.size()))};
}

}  // namespace

TEST_CASE("The first head of a key-value group run has the bits of the head run alone, for every preset",
          "[compare][gqa]") {
    const emu::AttentionInputs in = grouped_inputs();
    const emu::AttentionInputs head = emu::head_inputs(in, 0), group = emu::group_inputs(in, 0);
    std::uint64_t compared = 0, with_backward = 0;
    for (const emu::AttentionRecipe& r : emu::recipe_presets()) {
        for (const bool causal : {true, false}) {
            INFO(r.name << (causal ? ", causal" : ""));
            AttentionRunOptions o;
            o.causal = causal, o.threads = 2, o.backward = true, o.key_gradients = false;
            AttentionRun alone;
            try {
                alone = run_attention(head, r, o);
            } catch (const Error&) {
                o.backward = false;  // a recipe without a modelled backward (or this shape's)
                try {
                    alone = run_attention(head, r, o);
                } catch (const Error&) {
                    CHECK_THROWS_AS(run_attention(group, r, o), Error);
                    continue;
                }
            }
            o.key_gradients = true;
            const AttentionRun in_group = run_attention(group, r, o);
            const std::size_t rows = in.n_q;
            CHECK(first(in_group.forward.o, rows * in.d_v) == alone.forward.o);
            CHECK(first(in_group.forward.lse, rows) == alone.forward.lse);
            ++compared;
            if (!o.backward) continue;
            CHECK(first(in_group.backward->dq, rows * in.d) == alone.backward->dq);
            CHECK(first(in_group.backward->delta, rows) == alone.backward->delta);
            ++with_backward;
        }
    }
    CHECK(compared >= 40);
    CHECK(with_backward >= 20);
}
