// One test per rule of the tensor-core model (emu/mma/fused_dot_add.hpp), each built so that a
// model without the rule gives different bits: special values, overflow under RZ, the
// zero-term exponent, the sign of zero, truncation, unnormalized alignment, F and L.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "emu/mma/fused_dot_add.hpp"
#include "emu/numbers/round.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

const MmaModel& model(std::string_view arch, const Format& in, const Format& acc = f32,
                      std::string_view instruction = "mma.sync") {
    const MmaModel* m = find_mma_model(arch, instruction, in, in, acc);
    REQUIRE(m != nullptr);
    return *m;
}

std::uint32_t enc(const Format& f, double x) {
    CastOptions exact;
    const auto bits = static_cast<std::uint32_t>(cast_from_f64(x, f, exact));
    REQUIRE((std::isnan(x) || decode(f, bits) == x));  // every test value is exact in its format
    return bits;
}

// D for one output: c + sum a[k] * b[k], vectors padded with zeros to whole instructions.
std::uint32_t dot(const MmaModel& m, std::vector<double> a, std::vector<double> b, double c) {
    const int depth = (static_cast<int>(a.size()) + m.k - 1) / m.k * m.k;
    std::vector<std::uint32_t> ab(static_cast<std::size_t>(depth), 0), bb(static_cast<std::size_t>(depth), 0);
    for (std::size_t i = 0; i < a.size(); ++i) ab[i] = enc(m.a, a[i]);
    for (std::size_t i = 0; i < b.size(); ++i) bb[i] = enc(m.b, b[i]);
    return mma_dot(m, ab.data(), bb.data(), 1, depth, enc(m.accumulator, c));
}

const double infinity = std::numeric_limits<double>::infinity();
const double qnan = std::numeric_limits<double>::quiet_NaN();

}  // namespace

TEST_CASE("NaN anywhere gives the canonical NaN of the accumulator", "[mma][special]") {
    const MmaModel& m = model("sm90", bf16);
    CHECK(dot(m, {qnan, 1}, {1, 1}, 0) == 0x7FFFFFFFu);
    CHECK(dot(m, {1}, {-qnan}, 0) == 0x7FFFFFFFu);
    CHECK(dot(m, {1}, {1}, -qnan) == 0x7FFFFFFFu);
    // A NaN with a payload in C: still the canonical pattern.
    std::vector<std::uint32_t> one(16, 0);
    one[0] = enc(bf16, 1);
    CHECK(mma_dot(m, one.data(), one.data(), 1, 16, 0xFFC00001u) == 0x7FFFFFFFu);
    CHECK(dot(model("sm90", f16, f16), {qnan}, {1}, 0) == 0x7FFFu);
    CHECK(dot(model("sm90", e4m3), {qnan}, {1}, 0) == 0x7FFFFFFFu);
}

TEST_CASE("Inf times zero, and Infs of both signs, give NaN - a lone Inf gives that Inf", "[mma][special]") {
    const MmaModel& m = model("sm90", bf16);
    CHECK(dot(m, {infinity}, {0}, 0) == 0x7FFFFFFFu);
    CHECK(dot(m, {-0.0}, {-infinity}, 0) == 0x7FFFFFFFu);
    CHECK(dot(m, {infinity, infinity}, {1, -1}, 0) == 0x7FFFFFFFu);
    CHECK(dot(m, {infinity}, {1}, -infinity) == 0x7FFFFFFFu);
    CHECK(dot(m, {infinity, 3}, {-2, 1}, 5) == 0xFF800000u);
    CHECK(dot(m, {1}, {1}, infinity) == 0x7F800000u);
    CHECK(dot(m, {-infinity, -infinity}, {-1, -1}, 0) == 0x7F800000u);
    // sm90 FP8 mma.sync: the Inf travels through both blocks and the final add.
    CHECK(dot(model("sm90", e5m2), {infinity}, {2}, -3) == 0x7F800000u);
    CHECK(dot(model("sm90", e5m2), {infinity, 0, 1}, {1, 0, -infinity}, 0) ==
          0x7FFFFFFFu);  // k = 0 and k = 2: two blocks
}

TEST_CASE("Overflow gives Inf although the rounding is toward zero", "[mma][special]") {
    const MmaModel& m = model("sm90", bf16);
    const double big = 1.5 * std::ldexp(1.0, 127);
    CHECK(dot(m, {big}, {2}, 0) == 0x7F800000u);  // 1.5 * 2^128
    CHECK(dot(m, {big}, {-2}, 0) == 0xFF800000u);
    const double max_f32 = std::numeric_limits<float>::max();  // below 2^128: stays finite
    CHECK(dot(m, {1}, {1}, max_f32) == 0x7F7FFFFFu);
    CHECK(dot(m, {std::ldexp(1.0, 103)}, {1}, max_f32) == 0x7F7FFFFFu);  // max = 2^128 - 2^104: RZ keeps max
    CHECK(dot(m, {std::ldexp(1.0, 104)}, {1}, max_f32) == 0x7F800000u);  // exactly 2^128
    // FP16 output rounds to nearest: 65520 and above overflow.
    CHECK(dot(model("sm90", f16, f16), {15}, {1}, 65504) == 0x7BFFu);  // 65519 -> 65504
    CHECK(dot(model("sm90", f16, f16), {16}, {1}, 65504) == 0x7C00u);  // 65520: the tie rounds to 2^16
}

TEST_CASE("A zero term takes the exponent e_zero", "[mma][special]") {
    // Products 2^-140 and -2^-160, C = +0. With e_zero = -133 as Emax, the quantum is 2^-158
    // and -2^-160 truncates to 0: the result is 2^-140. Without it, Emax = -140 keeps
    // -2^-160 and RZ gives 2^-140 - 2^-149.
    const MmaModel& m = model("sm90", bf16);
    const std::vector<double> a{std::ldexp(1.0, -70), -std::ldexp(1.0, -80)},
        b{std::ldexp(1.0, -70), std::ldexp(1.0, -80)};
    CHECK(dot(m, a, b, 0) == 0x200u);
    MmaModel no_zero_exponent = m;
    no_zero_exponent.zero_exponent = -1000;
    CHECK(dot(no_zero_exponent, a, b, 0) == 0x1FFu);
    // sm80's e_zero = -132: quantum 2^-156, still drops 2^-160.
    CHECK(dot(model("sm80", bf16), a, b, 0) == 0x200u);
}

TEST_CASE("Every zero result is +0", "[mma][special]") {
    const MmaModel& m = model("sm90", bf16);
    CHECK(dot(m, {1, -1}, {1, 1}, -0.0) == 0u);
    CHECK(dot(m, {-0.0, 0.0}, {1, -1}, -0.0) == 0u);
    // A negative sum below the float32 grid: (1 + 2^-6) 2^-136 - (1 + 2^-7)^2 2^-136 = -2^-150,
    // kept by the block (quantum 2^-158), truncated to zero by float32.
    const double u = std::ldexp(1.0, -68);
    CHECK(dot(m, {(1 + 1.0 / 64) * u, -(1 + 1.0 / 128) * u}, {u, (1 + 1.0 / 128) * u}, 0) == 0u);
    CHECK(dot(m, {(1 + 1.0 / 64) * u, -(1 + 1.0 / 128) * u}, {u, (1 + 1.0 / 128) * u}, std::ldexp(1.0, -149)) == 0u);
    CHECK(dot(model("sm90", f16, f16), {1, -1}, {1, 1}, -0.0) == 0u);
    CHECK(dot(model("sm90", e4m3), {-0.0}, {1}, -0.0) == 0u);  // +0 + -0 in the final RN add
}

TEST_CASE("Terms are truncated toward zero to a multiple of 2^(Emax - F)", "[mma][special]") {
    // +2^14 and -2^14 cancel; Emax = 14, so C survives only as a multiple of 2^(14 - F).
    for (const auto& [arch, F] : {std::pair{"sm90", 25}, std::pair{"sm80", 24}}) {
        const MmaModel& m = model(arch, bf16);
        const double q = std::ldexp(1.0, 14 - F);
        for (const double x : {0.25, 0.5, 0.75, 1.5, 2.75}) {
            INFO(arch << " c = " << x << " quanta");
            for (const double sign : {1.0, -1.0}) {
                const float want = static_cast<float>(sign * std::trunc(x) * q);
                CHECK(dot(m, {128, -128}, {128, 128}, sign * x * q) == (want == 0 ? 0u : bits_of(want)));
            }
        }
    }
}

TEST_CASE("Alignment uses e_a + e_b, not the product's own exponent", "[mma][special]") {
    // 1.5 * 1.5 = 2.25 aligns on 2^0: with 2.25 - 2.25 cancelling, C = 1.5 * 2^-25 keeps 2^-25.
    // Aligned on 2^1 it would keep nothing.
    const MmaModel& m = model("sm90", bf16);
    CHECK(dot(m, {1.5, -1.5}, {1.5, 1.5}, 1.5 * std::ldexp(1.0, -25)) == bits_of(std::ldexp(1.0f, -25)));
    CHECK(dot(m, {1.5, -1.5, 1}, {1.5, 1.5, 0.75}, 1.5 * std::ldexp(1.0, -25)) == bits_of(0.75f));
}

TEST_CASE("Blocks of L products are rounded to the accumulator in between", "[mma][special]") {
    // +2^14 at k = 0, 2^-10 at k = 1, -2^14 at k = j. In one block the exact sum 2^-10 is kept;
    // across blocks the first rounds 2^14 + 2^-10 to 2^14 (float32 ulp 2^-9) and the result is 0.
    auto run = [](const MmaModel& m, int j) {
        std::vector<double> a(static_cast<std::size_t>(j + 1), 0.0), b(a.size(), 0.0);
        a[0] = 128, b[0] = 128;
        a[1] = 1, b[1] = std::ldexp(1.0, -10);
        a[static_cast<std::size_t>(j)] = -128, b[static_cast<std::size_t>(j)] = 128;
        return dot(m, a, b, 0);
    };
    const std::uint32_t kept = bits_of(std::ldexp(1.0f, -10));
    CHECK(run(model("sm90", bf16), 15) == kept);
    CHECK(run(model("sm90", bf16), 16) == 0u);
    CHECK(run(model("sm80", bf16), 7) == kept);
    CHECK(run(model("sm80", bf16), 8) == 0u);
    CHECK(run(model("sm80", f32), 3) == kept);  // TF32 on sm80: L = 4
    CHECK(run(model("sm80", f32), 4) == 0u);
    // sm90 FP8 mma.sync: the first block holds k mod 4 in {0, 1}, in every group of four.
    const MmaModel& fp8 = model("sm90", e5m2);
    CHECK(run(fp8, 2) == 0u);
    CHECK(run(fp8, 3) == 0u);
    CHECK(run(fp8, 4) == kept);
    CHECK(run(fp8, 17) == kept);
    CHECK(run(fp8, 18) == 0u);
    // sm90 wgmma FP8: one block of 32, but F = 13: next to 2^14 the quantum is 2, so 2^-10 is lost.
    CHECK(run(model("sm90", e5m2, f32, "wgmma"), 31) == 0u);
    CHECK(run(model("sm100", e5m2, f32, "tcgen05.mma"), 31) == kept);  // F = 25, L = 32
}
