#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "emu/batch/tensor_decode.hpp"
#include "emu/block/block_quantize.hpp"
#include "emu/block/mx_block.hpp"
#include "emu/block/nvfp4_block.hpp"
#include "lib/error.hpp"
#include "tests/lib/tensor_samples.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

struct Block {
    std::uint64_t scale;
    std::vector<std::uint64_t> elements;
};

Block quantize(const std::vector<double>& v, const Format& f, ScaleRule rule) {
    std::vector<Unpacked> u;
    for (double x : v) u.push_back(unpack(f64, bits_of(x)));
    std::vector<std::uint64_t> index(v.size(), 0), out(v.size());
    const std::uint64_t scale =
        mx_quantize_block(u.data(), static_cast<int>(v.size()), f, rule, CastOptions{}, index.data(), out.data());
    return {scale, out};
}

using Bits = std::vector<std::uint64_t>;

}  // namespace

// Worked by hand from OCP MX v1.0 section 6.3 and the element encodings of section 5.3.
TEST_CASE("MXFP8 E4M3: amax 1000 under each scale rule", "[mx]") {
    const std::vector<double> v{1000, 3, -0.01, 0};
    // floor: floor(log2 1000) = 9, minus emax 8: X = 2. 500 saturates to 448 (0x7E); 1.5 is
    // 0x3C; -0.005 = -2.56 * 2^-9 rounds to -3 * 2^-9 (0x83).
    const Block f = quantize(v, e4m3, ScaleRule::floor);
    CHECK(f.scale == 128);
    CHECK(f.elements == Bits{0x7E, 0x3C, 0x83, 0x00});
    // ceil, even and rceil all give X = 4 here: 250 -> 256 (0x78), 0.75 (0x34), -0.0025 =
    // -1.28 * 2^-9 -> 0x81. (even: 1000 = 1.953 * 2^9 rounds to 2^10 at 4 bits.)
    for (ScaleRule rule : {ScaleRule::ceil, ScaleRule::even, ScaleRule::rceil}) {
        const Block b = quantize(v, e4m3, rule);
        CHECK(b.scale == 129);
        CHECK(b.elements == Bits{0x78, 0x34, 0x81, 0x00});
    }
}

TEST_CASE("MXFP4: nearest-even elements, saturation under floor, none under rceil", "[mx]") {
    // floor(log2 6) = 2 = emax: X = 1. 6 = 0x7, 4 = 0x6, -3 = 0xD, 0.5 = 0x1, 0.25 is the tie
    // between 0 and 0.5 and goes to the even 0.
    CHECK(quantize({6, 4, -3, 0.5, 0.25}, e2m1, ScaleRule::floor).elements == Bits{0x7, 0x6, 0xD, 0x1, 0x0});
    const Block f = quantize({7, 1}, e2m1, ScaleRule::floor);  // 7 saturates to 6
    CHECK((f.scale == 127 && f.elements == Bits{0x7, 0x2}));
    const Block r = quantize({7, 1}, e2m1, ScaleRule::rceil);  // X = 2: 3.5 ties to the even 4 (0x6)
    CHECK((r.scale == 128 && r.elements == Bits{0x6, 0x1}));
    // even: 7 = 1.75 * 2^2 rounds to 2^3 at 2 bits, as rceil here; 5 = 1.25 * 2^2 does not.
    CHECK(quantize({7, 1}, e2m1, ScaleRule::even).scale == 128);
    CHECK(quantize({5, 1}, e2m1, ScaleRule::even).scale == 127);
}

TEST_CASE("MXFP6 and MXFP8 E5M2: the largest element values are reached exactly", "[mx]") {
    CHECK(quantize({7.5, 1}, e2m3, ScaleRule::floor).elements == Bits{0x1F, 0x08});
    CHECK(quantize({28, 0.0625}, e3m2, ScaleRule::floor).elements == Bits{0x1F, 0x01});
    const Block b = quantize({57344, 1}, e5m2, ScaleRule::floor);
    CHECK((b.scale == 127 && b.elements == Bits{0x7B, 0x3C}));
}

TEST_CASE("MXINT8: q * 2^-6 elements, ties to even q", "[mx]") {
    // floor(log2 3) = 1, emax 0: X = 2. 0.75 -> q 48; -2^-7 -> q -0.5 -> 0; 1.5 -> q 96.
    const Block b = quantize({1.5, -0.015625, 3}, int8, ScaleRule::floor);
    CHECK((b.scale == 128 && b.elements == Bits{0x30, 0x00, 0x60}));
}

TEST_CASE("MX special blocks: all zero, subnormal only, NaN, Inf, exponent beyond E8M0", "[mx]") {
    const Block zero = quantize({0, -0.0}, e4m3, ScaleRule::floor);
    CHECK((zero.scale == 0 && zero.elements == Bits{0x00, 0x80}));
    const Block tiny = quantize({std::ldexp(1.0, -149)}, e4m3, ScaleRule::floor);  // X clamps to 2^-127; 2^-22 -> 0
    CHECK((tiny.scale == 0 && tiny.elements == Bits{0x00}));
    const Block nan = quantize({1, NAN}, e4m3, ScaleRule::floor);
    CHECK((nan.scale == 0xFF && nan.elements == Bits{0x7F, 0x7F}));
    CHECK(quantize({1, -INFINITY}, e2m1, ScaleRule::rceil).scale == 0xFF);
    const Block huge = quantize({std::ldexp(1.0, 200), 1}, e4m3, ScaleRule::floor);  // 192 clamps to 127
    CHECK((huge.scale == 254 && huge.elements == Bits{0x7E, 0x00}));
    CHECK(std::isnan(mx_dequantize(e4m3, 0x00, 0xFF)));
    CHECK(mx_dequantize(e4m3, 0x3C, 129) == 6.0);
}

TEST_CASE("NVFP4: single- and two-level scales", "[nvfp4]") {
    std::vector<float> v(16, 0.0f);
    v[0] = 0.75f, v[1] = 3.0f, v[2] = -1.5f;
    std::vector<std::uint64_t> index(16, 0), out(16);
    // Single level: amax 3 -> scale 3 / 6 = 0.5 (UE4M3 0x30) -> elements 1.5, 6, -3.
    CHECK(nvfp4_quantize_block(v.data(), 16, 1.0f, CastOptions{}, index.data(), out.data()) == 0x30);
    CHECK((out[0] == 0x3 && out[1] == 0x7 && out[2] == 0xD && out[3] == 0x0));
    CHECK(nvfp4_dequantize(out[1], 0x30, 1.0f) == 3.0f);
    // Two levels with this block holding the tensor's amax: the block scale lands on 448.
    const float per_tensor = nvfp4_per_tensor_scale(3.0f);
    CHECK(per_tensor == static_cast<float>(3.0 / 2688.0));
    CHECK(nvfp4_quantize_block(v.data(), 16, per_tensor, CastOptions{}, index.data(), out.data()) == 0x7E);
    CHECK((out[0] == 0x3 && out[1] == 0x7 && out[2] == 0xD));
}

TEST_CASE("block_quantize: blocks along any axis with an offset equal the block routine - any thread count", "[mx]") {
    const Tensor t = [] {
        Tensor x = Tensor::zeros("v", DType::f32, {3, 50, 4});
        std::mt19937_64 rng(5);
        for (std::uint64_t i = 0; i < x.size(); ++i)
            x.set_bits_at(
                i, std::bit_cast<std::uint32_t>(std::ldexp(static_cast<float>(static_cast<std::int32_t>(rng() >> 40)),
                                                           static_cast<int>(rng() % 30) - 40)));
        return x;
    }();
    BlockSpec spec;
    spec.format = &mxfp4;
    spec.axis = 1;  // the token axis of [H, N, D]
    spec.block = 32;
    spec.offset = 10;
    spec.element_options.mode = RoundingMode::stochastic_exact;
    spec.element_options.seed = 9;
    const BlockQuantized q1 = [&] {
        BlockSpec s = spec;
        s.threads = 1;
        return block_quantize(t, s);
    }();
    const BlockQuantized q2 = [&] {
        BlockSpec s = spec;
        s.threads = 2;
        return block_quantize(t, s);
    }();
    CHECK(std::equal(q1.elements.bytes().begin(), q1.elements.bytes().end(), q2.elements.bytes().begin()));
    CHECK(q1.scales.shape() == Shape{3, 2, 4});  // 22 + 28 tokens: blocks [0, 22) and [22, 50)
    for (std::uint64_t h = 0; h < 3; ++h) {
        for (std::uint64_t d = 0; d < 4; ++d) {
            const std::uint64_t bounds[] = {0, 22, 50};
            for (int j = 0; j < 2; ++j) {
                std::vector<Unpacked> u;
                std::vector<std::uint64_t> index, out(32);
                for (std::uint64_t n = bounds[j]; n < bounds[j + 1]; ++n) {
                    index.push_back((h * 50 + n) * 4 + d);
                    u.push_back(unpack_element(t, index.back()));
                }
                const std::uint64_t scale =
                    mx_quantize_block(u.data(), static_cast<int>(u.size()), e2m1, ScaleRule::floor,
                                      spec.element_options, index.data(), out.data());
                CHECK(q1.scales.bits_at((h * 2 + j) * 4 + d) == scale);
                for (std::size_t i = 0; i < index.size(); ++i) CHECK(q1.elements.bits_at(index[i]) == out[i]);
            }
        }
    }
    const Tensor back = block_dequantize(q1, spec);
    for (std::uint64_t i = 0; i < back.size(); i += 7) {
        const std::uint64_t n = (i / 4) % 50, h = i / 200, d = i % 4;
        const std::uint64_t scale = q1.scales.bits_at((h * 2 + (n + 10) / 32) * 4 + d);
        CHECK(std::bit_cast<float>(static_cast<std::uint32_t>(back.bits_at(i))) ==
              static_cast<float>(mx_dequantize(e2m1, q1.elements.bits_at(i), scale)));
    }
}

TEST_CASE("block_quantize rejects bad axes, offsets and block sizes, and NVFP4 on non-finite tensors", "[mx]") {
    Tensor t = test::random_tensor("k", DType::bf16, {4, 32}, 3);
    BlockSpec spec;
    spec.axis = 2;
    CHECK_THROWS_WITH(block_quantize(t, spec),
                      Catch::Contains("tensor 'k'") && Catch::Contains("axis 2 is outside shape [4, 32]"));
    spec.axis = -1;
    spec.offset = 32;
    CHECK_THROWS_WITH(block_quantize(t, spec), Catch::Contains("offset 32"));
    spec.offset = 0;
    spec.format = &nvfp4;
    spec.block = 32;
    CHECK_THROWS_WITH(block_quantize(t, spec), Catch::Contains("NVFP4 blocks hold 16"));
    spec.block = 0;
    t.set_bits_at(5, 0x7FC0);  // NaN
    CHECK_THROWS_WITH(block_quantize(t, spec), Catch::Contains("element 5 is not finite"));
}

TEST_CASE(
    "block_quantize's batch path equals the block-by-block reference: every MX format, rule, mode, layout, "
    "source dtype and thread count",
    "[mx]") {
    std::mt19937_64 rng(17);
    const Shape shape{3, 70, 5};
    std::uint64_t compared = 0;
    for (DType dtype : {DType::f32, DType::bf16, DType::e5m2, DType::i16}) {
        Tensor t = test::random_tensor("x", dtype, shape, rng());
        if (dtype == DType::f32)  // values of moderate range (random patterns are mostly huge or tiny)
            for (std::uint64_t i = 0; i < t.size(); ++i)
                t.set_bits_at(i, std::bit_cast<std::uint32_t>(
                                     std::ldexp(static_cast<float>(static_cast<std::int32_t>(rng() >> 40)),
                                                static_cast<int>(rng() % 40) - 60)));
        for (const BlockFormat& f : all_block_formats) {
            if (f.nvfp4) continue;
            for (ScaleRule rule : all_scale_rules) {
                for (const char* mode : {"rne", "rtz", "sr", "sr:4"}) {
                    for (auto [axis, offset] : {std::pair{-1, 0}, {1, 13}, {0, 1}, {2, 3}}) {
                        BlockSpec spec;
                        spec.format = &f;
                        spec.rule = rule;
                        spec.axis = axis;
                        spec.offset = offset;
                        spec.block = axis == 1 ? 32 : 4;
                        parse_rounding_mode(mode, spec.element_options);
                        spec.element_options.seed = 3;
                        spec.threads = 2;
                        const BlockQuantized batch = block_quantize(t, spec);
                        spec.threads = 1;
                        spec.scalar_reference = true;
                        const BlockQuantized reference = block_quantize(t, spec);
                        INFO(name(dtype) << " " << f.name << " " << scale_rule_name(rule) << " " << mode << " axis "
                                         << axis);
                        REQUIRE(test::same_bits(batch.scales, reference.scales));
                        REQUIRE(test::same_bits(batch.elements, reference.elements));
                        ++compared;
                    }
                }
            }
        }
    }
    CHECK(compared == 4 * 6 * 4 * 4 * 4);
}
