// ATen's own FP16 GEMM (emu/mma/aten_blas_gemm.hpp), which adds the FP16 gradients of ATen's CPU flash backward
// where no FP16 GEMM of oneDNN's or MKL's takes them: gemm_notrans_'s dot in four partial sums, gemm_transb_'s fused
// chain from C with alpha applied to one operand first, and C rounded to FP16 once at the end. Each rule is shown by
// values whose sum depends on it (2048 + 1 is a tie FP16 rounds back to 2048; float32 holds it). Against torch
// itself: tests/peer/test_aten_cpu_torch.py on an AMD CPU.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "emu/mma/aten_blas_gemm.hpp"
#include "emu/numbers/round.hpp"
#include "emu/numbers/unpack.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

constexpr float big = 16777216.0f;  // 2^24: + 1 is a float32 tie that rounds back to it

std::uint32_t h(float x) { return static_cast<std::uint32_t>(cast_from_f32(x, f16, CastOptions{})); }

float value(std::uint32_t bits) { return static_cast<float>(decode(f16, bits)); }

std::vector<std::uint32_t> halves(const std::vector<float>& x) {
    std::vector<std::uint32_t> out;
    for (const float v : x) out.push_back(h(v));
    return out;
}

// c + alpha (x . y), a 1 x k row times a k x 1 column, by the given loop
template <typename Gemm>
float dot(Gemm gemm, const std::vector<float>& x, const std::vector<float>& y, float c = 0.0f, float alpha = 1.0f) {
    const std::vector<std::uint32_t> a = halves(x), b = halves(y);
    std::uint32_t out = h(c);
    gemm(f16, a.data(), b.data(), &out, 1, 1, x.size(), alpha);
    return value(out);
}

}  // namespace

TEST_CASE("ATen's FP16 gemm_notrans_: four partial sums over whole groups of four, the rest into the first",
          "[cpu-gemm]") {
    // 4096 x 4096 = 2^24, an FP16 product exact in float32
    std::vector<float> x(8, 0.0f), y(8, 1.0f);
    // 2^24 at product 0 and 1 at product 4 (both sum 0: 2^24 + 1 rounds back to 2^24), -2^24 at product 1
    // (sum 1): 0, where one chain in order keeps the 1 (2^24 - 2^24 first)
    x[0] = 4096.0f, y[0] = 4096.0f, x[4] = 1.0f, x[1] = -4096.0f, y[1] = 4096.0f;
    CHECK(dot(aten_blas_gemm_dot_add, x, y) == 0.0f);
    // 2^24 at product 0, 1 at product 1 (sum 1), -2^24 at product 4 (sum 0): 1, where one chain loses it
    x.assign(8, 0.0f), y.assign(8, 1.0f);
    x[0] = 4096.0f, y[0] = 4096.0f, x[1] = 1.0f, x[4] = -4096.0f, y[4] = 4096.0f;
    CHECK(dot(aten_blas_gemm_dot_add, x, y) == 1.0f);
    // K = 7: products 4..6 are past the last whole group and go to sum 0, so 1 at product 5 is lost against 2^24
    // (in sum 1 it would stay: -2^24 + 1 is exact)
    std::vector<float> x7(7, 0.0f), y7(7, 1.0f);
    x7[0] = 4096.0f, y7[0] = 4096.0f, x7[5] = 1.0f, x7[1] = -4096.0f, y7[1] = 4096.0f;
    CHECK(dot(aten_blas_gemm_dot_add, x7, y7) == 0.0f);
}

TEST_CASE("ATen's FP16 gemm_notrans_: C + RN(alpha dot) in float32, rounded to FP16 once", "[cpu-gemm]") {
    // 2048 + 1 + 1 in float32 is 2050, an FP16 value; two FP16 roundings (2048 + 1 -> 2048) would lose both
    CHECK(dot(aten_blas_gemm_dot_add, {1.0f, 1.0f}, {1.0f, 1.0f}, 2048.0f) == 2050.0f);
    // alpha times the dot, rounded to float32, then added: 3 x (1 / 3 in FP16) is not 1
    const float third = value(h(1.0f / 3.0f));
    const float expect = value(h(static_cast<float>(3.0 * static_cast<double>(third))));
    CHECK(dot(aten_blas_gemm_dot_add, {third}, {1.0f}, 0.0f, 3.0f) == expect);
}

TEST_CASE("ATen's FP16 gemm_transb_: one fused chain from C in order, alpha on the first operand first", "[cpu-gemm]") {
    // from C = 2048 in float32: + 1 + 1 gives 2050 (one rounding to FP16 at the end)
    CHECK(dot(aten_blas_gemm_axpy_add, {1.0f, 1.0f}, {1.0f, 1.0f}, 2048.0f) == 2050.0f);
    // in order: 2^24 (4096 x 4096), + 1 (a float32 tie, back to 2^24), - 2^24: 0 (partial sums would keep the 1)
    CHECK(dot(aten_blas_gemm_axpy_add, {4096.0f, 1.0f, -4096.0f, 0.0f}, {4096.0f, 1.0f, 4096.0f, 0.0f}) == 0.0f);
    // fused: alpha = 1 + 2^-23 on a = 1 gives val = 1 + 2^-23; b = 1 + 2^-2 + 2^-10 (FP16) and C = -b leave
    // b 2^-23 = 2.502 units of 2^-24 (FP16's smallest subnormal) in one rounding: FP16 3 units. Unfused, the
    // product rounds to b + 2^-23 in float32 first and leaves 2 units.
    const float b = 1.2509765625f;
    CHECK(dot(aten_blas_gemm_axpy_add, {1.0f}, {b}, -b, 1.0f + 1.0f / 8388608.0f) == 3.0f / big);
}
