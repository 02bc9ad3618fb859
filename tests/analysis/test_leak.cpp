// Future leakage (analysis/leak.hpp) reproduces "Future leakage in block-quantized attention" under the emulated
// kernel: V in MXFP4 (and MXFP8) blocks along tokens lets later tokens change earlier outputs and makes the parallel
// and autoregressive computations differ; with the diagonal block unquantized both are exactly zero; masked keys never
// move an output.
#include <catch2/catch.hpp>

#include "analysis/leak.hpp"
#include "analysis/synthetic_attention.hpp"

using namespace roundscope;
using namespace roundscope::analysis;

TEST_CASE("Block-quantized V leaks the future - the diagonal fix removes it exactly", "[leak]") {
    SyntheticSpec spec;
    spec.n = 96, spec.d = 32, spec.heads = 2, spec.seed = 5;
    const emu::AttentionInputs in = synthetic_attention(spec);
    for (const emu::BlockFormat* format : {&emu::mxfp4, &emu::mxfp8_e4m3}) {
        for (const bool fix : {false, true}) {
            LeakOptions o;
            o.recipe = emu::find_recipe("mxfp4-v");
            o.format = format, o.fix = fix;
            const LeakResult r = leak(in, o);
            INFO(format->name << (fix ? " with" : " without") << " the fix: " << r.leaking_pairs << " leaking pairs, "
                              << r.parallel_vs_autoregressive_max_abs_diff << " parallel vs autoregressive");
            CHECK(r.tokens == 96);
            CHECK(r.masked_contribution_violations == 0);
            if (fix) {
                CHECK(r.leaking_pairs == 0);
                CHECK(r.max_future_influence == 0);
                CHECK(r.parallel_vs_autoregressive_max_abs_diff == 0);
                CHECK(r.mixed_scale_blocks == 0);
            } else {
                CHECK(r.leaking_pairs > 0);
                CHECK(r.max_future_influence > 0);
                CHECK(r.parallel_vs_autoregressive_max_abs_diff > 0);
                CHECK(r.mixed_scale_blocks == 2 * (96 - 3));  // every query but each block's last token
            }
        }
    }
}

TEST_CASE("A natural change of a later token leaks through fewer pairs than x16, and none with the fix", "[leak]") {
    SyntheticSpec spec;
    spec.n = 96, spec.d = 32, spec.heads = 2, spec.seed = 5;
    const emu::AttentionInputs in = synthetic_attention(spec);
    LeakOptions o;
    o.recipe = emu::find_recipe("mxfp4-v");
    const LeakResult plain = leak(in, o);
    CHECK(!plain.leaking_pairs_natural);
    CHECK(plain.future_pairs == 2 * 3 * (32 * 31 / 2));  // two heads, three blocks of 32
    o.natural = true;
    const LeakResult natural = leak(in, o);
    INFO(*natural.leaking_pairs_natural << " of " << natural.future_pairs << " pairs, x16: " << natural.leaking_pairs);
    CHECK(natural.leaking_pairs == plain.leaking_pairs);  // the x16 figures do not move
    CHECK(*natural.leaking_pairs_natural > 0);
    CHECK(*natural.leaking_pairs_natural < natural.leaking_pairs);  // a token only leaks if it moves its block's scale
    CHECK(*natural.max_future_influence_natural > 0);
    o.fix = true;
    const LeakResult fixed = leak(in, o);
    CHECK(*fixed.leaking_pairs_natural == 0);
    CHECK(*fixed.max_future_influence_natural == 0);
}
