// Property: pv_depth=tile runs P V over every k-step of block_n, a head's last partial tile
// too (zeros past its keys), as a kernel's fixed loop does; pv_depth=keys over the tile's keys
// only. A zero k-step changes an accumulator only where it is -0 or a NaN with another payload
// than the model's own (shown here on the sm90 wgmma model over a sample of every float32), and
// the model's results are never either: a sum that underflows or cancels is +0, a NaN is the
// canonical one. So the two agree bit for bit, on random partial tiles and on a problem built to
// reach -0 (negative_zero_tile.hpp). The recipe refuses the setting where it is not modelled.
#include <catch2/catch.hpp>

#include <cstdint>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "emu/mma/fused_dot_add.hpp"
#include "emu/mma/mma_model.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"
#include "tests/emu/attention/negative_zero_tile.hpp"

using namespace roundscope;

namespace {

emu::AttentionRecipe with(const char* name, const char* setting) {
    emu::AttentionRecipe r = emu::find_recipe(name);
    emu::apply_setting(r, setting);
    return r;
}

}  // namespace

TEST_CASE("a zero k-step changes only -0 and foreign NaN payloads, which the wgmma model never returns",
          "[emu][flash][pv_depth]") {
    const emu::MmaModel& m = *emu::find_mma_model("sm90", "wgmma", emu::bf16, emu::bf16, emu::f32);
    const std::uint32_t zeros[16] = {},
                        minus_zeros[16] = {0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000,
                                           0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000};
    const std::uint32_t canonical_nan = emu::mma_dot(m, zeros, zeros, 1, 16, 0x7FC00001u);
    std::uint64_t changed = 0;
    for (std::uint64_t c = 0; c < (std::uint64_t{1} << 32); c += 9973) {
        const auto x = static_cast<std::uint32_t>(c);
        const bool nan = (x & 0x7FFFFFFFu) > 0x7F800000u;
        for (const std::uint32_t* b : {zeros, minus_zeros}) {
            const std::uint32_t r = emu::mma_dot(m, zeros, b, 1, 16, x);
            if (nan) {
                CHECK(r == canonical_nan);
            } else if (x == 0x80000000u) {
                CHECK(r == 0u);
            } else {
                changed += r != x;
            }
        }
    }
    CHECK(changed == 0);
    CHECK(emu::mma_dot(m, zeros, zeros, 1, 16, 0x80000000u) == 0u);  // -0 becomes +0 ...
    // ... and the model does not make -0: the products of the problem built for it sum to +0
    const emu::AttentionShape shape = test::negative_zero_shape();
    const emu::AttentionOperands in = test::negative_zero_operands();
    for (const char* name : {"h100-bf16", "fa3-bf16"}) {
        INFO(name);
        const emu::ForwardResult keys = emu::flash_forward(with(name, "pv_depth=keys"), shape, in, 1);
        const emu::ForwardResult tile = emu::flash_forward(with(name, "pv_depth=tile"), shape, in, 1);
        for (std::uint64_t c = 0; c < shape.d_v; ++c) {
            CHECK(bits_of(keys.o_f32[c]) == 0u);
            CHECK(bits_of(tile.o_f32[c]) == 0u);
        }
    }
}

TEST_CASE("pv_depth=tile and keys agree on ordinary inputs, partial tiles included", "[emu][flash][pv_depth]") {
    for (const bool causal : {false, true}) {
        const emu::AttentionShape shape{2, 150, 201, 64, 64, causal, 0.125f};
        const emu::AttentionOperands in = emu::random_operands(shape, emu::bf16, 3);
        const emu::ForwardResult keys = emu::flash_forward(with("h100-bf16", "pv_depth=keys"), shape, in, 2);
        const emu::ForwardResult tile = emu::flash_forward(with("h100-bf16", "pv_depth=tile"), shape, in, 2);
        CHECK(keys.o == tile.o);
        for (std::size_t i = 0; i < keys.lse.size(); ++i) CHECK(bits_of(keys.lse[i]) == bits_of(tile.lse[i]));
    }
}

TEST_CASE("pv_depth=tile is refused where it is not modelled", "[emu][flash][pv_depth]") {
    CHECK_THROWS_WITH(emu::validate(with("mxfp4-v-fixed", "pv_depth=tile")), Catch::Contains("pv_depth"));
    CHECK_THROWS_WITH(emu::validate(with("naive-f32", "pv_depth=tile")), Catch::Contains("pv_depth"));
    CHECK_NOTHROW(emu::validate(with("mxfp4-v", "pv_depth=tile")));
}
