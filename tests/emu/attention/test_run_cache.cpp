// S and whole forward passes shared between runs (emu/attention/flash/run_cache.hpp), and runs over a
// subset of the rows (ForwardOptions::row_begin/row_end): each gives the bits of the plain run,
// for every preset the emulator runs, causal or not, forward and backward. An S entry serves only
// the Q and K, mask and product it was made from (a changed bit of K, or the float64 product,
// makes a new one); a kept pass only the very same recipe, shape, operands, sink and rows.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <utility>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/flash/run_cache.hpp"
#include "tests/emu/attention/recipe_test_helpers.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

bool same_counts(const ForwardCounts& a, const ForwardCounts& b) {
    return a.p_bar_one == b.p_bar_one && a.p_nonzero == b.p_nonzero && a.p_underflow == b.p_underflow &&
           a.p_saturated == b.p_saturated && a.repeated_max_rows == b.repeated_max_rows && a.tied_rows == b.tied_rows &&
           a.tie_dominated_rows == b.tie_dominated_rows && a.tie_share_sum == b.tie_share_sum &&
           a.one_key_rows == b.one_key_rows;
}

using test::same_bits;

}  // namespace

TEST_CASE("Runs with shared S, and kept passes, give the plain runs' bits, forward and backward, for every preset",
          "[flash][scores]") {
    for (const AttentionRecipe& r : recipe_presets()) {
        for (const bool causal : {false, true}) {
            DYNAMIC_SECTION(r.name << (causal ? " causal" : "")) {
                const AttentionShape sh = attention_shape(2, 150, 170, 32, causal);
                const AttentionOperands in = random_operands(sh, *r.target.input, 11, 2.0);
                RunCache cache;
                ForwardOptions plain, shared;
                plain.threads = shared.threads = 2;
                shared.runs = &cache;
                ForwardResult a, b;
                try {
                    a = flash_forward(r, sh, in, plain);
                } catch (const std::exception&) {
                    continue;  // a preset this shape cannot run (its own test says why)
                }
                b = flash_forward(r, sh, in, shared);
                const ForwardResult c = flash_forward(r, sh, in, shared);  // the pass kept
                // (the math path's S is of q and k scaled first: it takes none from the cache)
                const bool math =
                    r.softmax.kind == SoftmaxKind::cuda_math || r.softmax.kind == SoftmaxKind::aten_cpu_math;
                CHECK(cache.computed() == (math ? 0U : 1U));
                CHECK(cache.forwards_reused() == 1);
                for (const ForwardResult* x : {&std::as_const(b), &c}) {
                    CHECK(same_bits(a.o, x->o));
                    CHECK(same_bits(a.o_f32, x->o_f32));
                    CHECK(same_bits(a.lse, x->lse));
                    CHECK(same_counts(a.counts, x->counts));
                }
                // Another recipe over the same Q and K (the tiles in the other order): its S from the entry.
                AttentionRecipe reversed = r;
                reversed.tiles.kv_order = r.tiles.kv_order == KvOrder::reverse ? KvOrder::forward : KvOrder::reverse;
                ForwardResult plain_reversed;
                try {
                    plain_reversed = flash_forward(reversed, sh, in, plain);
                } catch (const std::exception&) {
                    plain_reversed.o.clear();
                }
                if (!plain_reversed.o.empty()) {
                    const ForwardResult d = flash_forward(reversed, sh, in, shared);
                    CHECK(cache.reused() == 1);
                    CHECK(cache.forwards_reused() == 1);
                    CHECK(same_bits(plain_reversed.o, d.o));
                    CHECK(same_bits(plain_reversed.lse, d.lse));
                    CHECK(same_counts(plain_reversed.counts, d.counts));
                }
                if (r.softmax.kind != SoftmaxKind::online && r.softmax.kind != SoftmaxKind::online_torch) continue;
                BackwardResult pa;
                try {
                    pa = flash_backward(r, sh, in, a, 2);
                } catch (const std::exception&) {
                    CHECK_THROWS(flash_backward(r, sh, in, b, 2, &cache));  // the same refusal
                    continue;
                }
                const BackwardResult pb = flash_backward(r, sh, in, b, 2, &cache);
                CHECK(same_bits(pa.dq, pb.dq));
                CHECK(same_bits(pa.dk, pb.dk));
                CHECK(same_bits(pa.dv, pb.dv));
                CHECK(same_bits(pa.delta, pb.delta));
                CHECK(cache.computed() == 1);
            }
        }
    }
}

TEST_CASE("An entry serves only its own Q, K, mask and product", "[flash][scores]") {
    AttentionRecipe r = find_recipe("fa2-bf16");
    const AttentionShape sh = attention_shape(1, 70, 70, 16, true);
    AttentionOperands in = random_operands(sh, bf16, 3);
    RunCache cache;
    ForwardOptions o;
    o.runs = &cache;
    flash_forward(r, sh, in, o);
    in.k[5] ^= 1;  // one bit of K
    const ForwardResult changed = flash_forward(r, sh, in, o);
    CHECK(cache.computed() == 2);
    CHECK(same_bits(changed.o, flash_forward(r, sh, in, 1).o));
    AttentionShape open = sh;
    open.causal = false;
    flash_forward(r, open, in, o);
    CHECK(cache.computed() == 3);
    r.scores.product = Product::exact_f64;
    const ForwardResult exact = flash_forward(r, sh, in, o);
    CHECK(cache.computed() == 4);
    CHECK(same_bits(exact.o, flash_forward(r, sh, in, 1).o));
    CHECK(cache.reused() == 0);
}

TEST_CASE("The oldest entries go first past the cache's size", "[flash][scores]") {
    const AttentionRecipe r = find_recipe("fa2-bf16");
    const AttentionShape sh = attention_shape(1, 64, 64, 16, false);
    RunCache cache(3 * 4 * (64 * 16 * 2 + 64 * 64) / 2);  // room for one entry and a half
    ForwardOptions o;
    o.runs = &cache;
    const AttentionOperands first = random_operands(sh, bf16, 1), second = random_operands(sh, bf16, 2);
    flash_forward(r, sh, first, o);
    flash_forward(r, sh, second, o);  // evicts the first
    flash_forward(r, sh, first, o);
    CHECK(cache.computed() == 3);
    CHECK(cache.reused() == 0);
}

TEST_CASE("A subset of the rows gets the bits the whole run gives those rows", "[flash][rows]") {
    for (const char* name : {"fa2-bf16", "fa3-fp8", "mxfp4-v", "mxfp4-v-fixed", "fa2-bf16-torch"}) {
        const AttentionRecipe r = find_recipe(name);
        const AttentionShape sh = attention_shape(2, 200, 200, 32, true);
        const AttentionOperands in = random_operands(sh, *r.target.input, 7);
        const ForwardResult all = flash_forward(r, sh, in, 1);
        for (const auto& [begin, end] :
             {std::pair<std::uint64_t, std::uint64_t>{0, 1}, {5, 37}, {63, 65}, {130, 200}}) {
            ForwardOptions o;
            o.row_begin = begin, o.row_end = end;
            const ForwardResult part = flash_forward(r, sh, in, o);
            INFO(name << " rows " << begin << ".." << end);
            for (std::uint64_t h = 0; h < sh.heads; ++h) {
                for (std::uint64_t i = 0; i < sh.n_q; ++i) {
                    const auto at = static_cast<std::ptrdiff_t>((h * sh.n_q + i) * sh.d_v);
                    const bool inside = i >= begin && i < end;
                    const bool equal = std::equal(all.o.begin() + at, all.o.begin() + at + 32, part.o.begin() + at);
                    const bool zero = std::all_of(part.o.begin() + at, part.o.begin() + at + 32,
                                                  [](std::uint32_t x) { return x == 0; });
                    CHECK((inside ? equal : zero));
                }
            }
        }
    }
}

TEST_CASE("A kept pass serves only the same recipe, shape, operands, sink and rows", "[flash][scores]") {
    const AttentionRecipe r = find_recipe("fa3-fp8");
    const AttentionShape sh = attention_shape(1, 80, 80, 16, true);
    AttentionOperands in = random_operands(sh, e4m3, 4);
    RunCache cache;
    ForwardOptions o;
    o.runs = &cache;
    flash_forward(r, sh, in, o);
    ForwardOptions sink = o;
    sink.uncounted_keys = 1;
    const ForwardResult with_sink = flash_forward(r, sh, in, sink);
    CHECK(with_sink.counts.p_nonzero == flash_forward(r, sh, in, ForwardOptions{.uncounted_keys = 1}).counts.p_nonzero);
    ForwardOptions rows = o;
    rows.row_end = 40;
    flash_forward(r, sh, in, rows);
    AttentionRecipe scaled = r;
    scaled.p_and_v.p_scale = r.p_and_v.p_scale == 256 ? 1 : 256;
    flash_forward(scaled, sh, in, o);
    in.v[3] ^= 1;  // one bit of V: S is the same, the pass is not
    const ForwardResult changed = flash_forward(r, sh, in, o);
    CHECK(same_bits(changed.o, flash_forward(r, sh, in, 1).o));
    CHECK(cache.forwards_reused() == 0);
    CHECK(cache.computed() == 1);
    flash_forward(r, sh, in, o);
    CHECK(cache.forwards_reused() == 1);
}
