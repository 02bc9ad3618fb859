// PyTorch's split-KV path (emu/attention/flash/flash_split_kv.hpp): libdevice's expf and logf as the
// combine kernel's SASS computes them, within CUDA's documented error bounds (2 and 1 ulps)
// against the correctly rounded functions, with their special values; the splits' keys; the
// combine of rows no split sees; kv_splits, a fixed split of any online recipe's own tiles, against
// the unsplit recipe. Bit-exactness with the GPU: golden_h100 (S2's 8 cases); with a peer: the numpy
// flash forward's split kernels (tests/peer/test_fit_numpy_kernels.py).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_split_kv.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/math/libdevice_math.hpp"
#include "lib/bits.hpp"
#include "tests/emu/attention/recipe_test_helpers.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

// Distance in ulps between x and the float nearest `exact` (both finite, the same sign).
std::int64_t ulps(float x, double exact) {
    const auto a = static_cast<std::int64_t>(static_cast<std::int32_t>(bits_of(x)));
    const auto b = static_cast<std::int64_t>(static_cast<std::int32_t>(bits_of(static_cast<float>(exact))));
    return a > b ? a - b : b - a;
}

}  // namespace

TEST_CASE("libdevice expf is within 2 ulps and logf within 1 of the correctly rounded functions", "[split-kv]") {
    std::int64_t worst_exp = 0, worst_log = 0;
    for (std::uint64_t b = 0; b <= 0xFFFFFFFFu; b += 1021) {
        const float x = float_from_bits(static_cast<std::uint32_t>(b));
        if (x != x) continue;
        if (x >= -87.0f && x <= 88.0f) worst_exp = std::max(worst_exp, ulps(libdevice_expf(x), std::exp(double(x))));
        if (x > 0 && std::isfinite(x)) worst_log = std::max(worst_log, ulps(libdevice_logf(x), std::log(double(x))));
    }
    CHECK(worst_exp <= 2);
    CHECK(worst_exp >= 1);  // not the correctly rounded function
    CHECK(worst_log <= 1);
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(libdevice_expf(0.0f) == 1.0f);
    CHECK(libdevice_expf(-inf) == 0.0f);
    CHECK(libdevice_expf(-200.0f) == 0.0f);
    CHECK(libdevice_logf(1.0f) == 0.0f);
    CHECK(libdevice_logf(0.0f) == -inf);
    CHECK(libdevice_logf(-0.0f) == -inf);
    CHECK(libdevice_logf(inf) == inf);
    CHECK(std::isnan(libdevice_logf(-1.0f)));
    CHECK(std::isnan(libdevice_logf(std::numeric_limits<float>::quiet_NaN())));
    CHECK(ulps(libdevice_logf(1e-40f), std::log(1e-40)) <= 1);  // a subnormal, scaled by 2^23 first
}

TEST_CASE("The splits take whole KV tiles, ceil(tiles / splits) each, and cover every key once", "[split-kv]") {
    CHECK(split_kv_tiles(64).block_n == 256);
    CHECK(split_kv_tiles(128).block_n == 128);
    CHECK(split_kv_tiles(256).block_n == 64);
    for (const std::uint64_t n : {1u, 127u, 128u, 1000u, 1025u}) {
        for (const int splits : {2, 3, 8, 13}) {
            std::uint64_t next = 0;
            for (int s = 0; s < splits; ++s) {
                const Span k = split_keys(n, 128, splits, s);
                CHECK(k.begin == next);
                CHECK((k.begin % 128 == 0 || k.begin == n));
                next = k.end;
            }
            CHECK(next == n);
        }
    }
}

TEST_CASE("A row no split sees gets O = 0 and LSE = +inf from the combine, as PyTorch's", "[split-kv]") {
    // Causal, 1000 queries over 600 keys, bottom-right aligned: rows 0 .. 399 see no key.
    const AttentionShape sh{1, 1000, 600, 128, 128, true, 0.08838834764831845f};
    REQUIRE(torch_flash_splits(1, 1000, 600, 128, 132) > 1);
    const ForwardResult f = flash_forward(find_recipe("torch-flash-sm90"), sh, random_operands(sh, bf16, 9), 2);
    for (std::uint64_t i : {0u, 399u}) {
        CHECK(f.lse[i] == std::numeric_limits<float>::infinity());
        for (std::uint64_t c = 0; c < 128; ++c) CHECK(f.o[i * 128 + c] == 0);
    }
    CHECK(std::isfinite(f.lse[400]));
}

TEST_CASE("kv_splits: the recipe's own tiles split and combined, under every online epilogue", "[split-kv]") {
    // Causal, 300 keys in tiles of 64: two splits take keys 0 .. 191 and 192 .. 299. A row below
    // 192 sees the first split alone, and the combine of one split with an empty one is exact
    // (expf(0) = 1, logf(1) = 0): its O and LSE are the unsplit kernel's bit for bit. The rows
    // that see both differ, by little.
    const AttentionShape sh = test::square_shape(2, 300, 64, true);
    for (const auto& [preset, input] :
         {std::pair{"fa2-bf16", &bf16}, std::pair{"torch-flash-sm90", &bf16}, std::pair{"torch-cudnn-sm90", &bf16},
          std::pair{"torch-efficient-sm90", &bf16}, std::pair{"h100-fp8", &e4m3}}) {
        INFO(preset);
        const AttentionRecipe r = test::with(find_recipe(preset), {"split_kv_sms=0", "block_n=64"});
        const AttentionOperands in = random_operands(sh, *input, 5);
        const ForwardResult whole = flash_forward(r, sh, in, 1);
        const ForwardResult split = flash_forward(test::with(r, {"kv_splits=2"}), sh, in, 1);
        const ForwardResult threads = flash_forward(test::with(r, {"kv_splits=2"}), sh, in, 2);
        CHECK(test::same_bits(split.o, threads.o));
        CHECK(test::same_bits(split.lse, threads.lse));
        std::size_t differ = 0;
        for (std::uint64_t head = 0; head < 2; ++head)
            for (std::uint64_t row = 0; row < 300; ++row) {
                const std::uint64_t i = head * 300 + row;
                bool same = bits_of(split.lse[i]) == bits_of(whole.lse[i]);
                for (std::uint64_t c = 0; c < 64; ++c) same = same && split.o[i * 64 + c] == whole.o[i * 64 + c];
                if (row < 192) {
                    CHECK(same);
                } else {
                    differ += same ? 0 : 1;
                    CHECK(std::fabs(split.lse[i] - whole.lse[i]) <= 1e-5f * std::fmax(1.0f, std::fabs(whole.lse[i])));
                }
            }
        CHECK(differ > 0);  // the split is not vacuous
    }
}

TEST_CASE("kv_splits: more splits than tiles leave some empty, and the split is refused where it has no meaning",
          "[split-kv]") {
    const AttentionShape sh = test::square_shape(1, 200, 64);
    const AttentionOperands in = random_operands(sh, bf16, 6);
    const AttentionRecipe r = test::with(find_recipe("fa2-bf16"), {"block_n=64"});
    const ForwardResult four = flash_forward(r, sh, in, 1),
                        eight = flash_forward(test::with(r, {"kv_splits=8"}), sh, in, 1);
    for (std::size_t i = 0; i < 200; ++i) {
        CHECK(std::isfinite(eight.lse[i]));
        CHECK(std::fabs(eight.lse[i] - four.lse[i]) <= 1e-5f * std::fmax(1.0f, std::fabs(four.lse[i])));
    }
    CHECK_THROWS_WITH(validate(test::with(find_recipe("naive-f32"), {"kv_splits=2"})), Catch::Contains("kv_splits"));
    CHECK_THROWS_WITH(validate(test::with(find_recipe("torch-flash-sm90"), {"kv_splits=2"})),
                      Catch::Contains("split_kv_sms"));
    CHECK_THROWS_WITH(test::with(r, {"kv_splits=0"}), Catch::Contains("kv_splits"));
}
