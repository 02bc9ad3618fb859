// MKL's BF16 and FP16 GEMMs as they run on an AMD CPU (emu/mma/mkl_avx2_gemm.hpp): one float32 chain over K in
// order, K's blocks (192; two halves below 384, an odd K's last product alone), C before the blocks, subnormals kept.
// Each rule is shown by values whose sum depends on it (2^24 + 1 is a tie that rounds back to 2^24; 1 - 2^24 is exact).
// Against torch itself: tests/peer/test_aten_cpu_torch.py on an AMD CPU.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "emu/mma/mkl_avx2_gemm.hpp"
#include "lib/bits.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

constexpr float big = 16777216.0f;  // 2^24

std::vector<std::uint32_t> bf16_bits(const std::vector<float>& x) {
    std::vector<std::uint32_t> out;
    for (const float v : x) out.push_back(bits_of(v) >> 16);  // exact for the values used here
    return out;
}

// sum x (a 1 x k row times a column of ones), from C where given
float sum(const std::vector<float>& x, const float* c = nullptr) {
    const std::vector<std::uint32_t> a = bf16_bits(x), ones = bf16_bits(std::vector<float>(x.size(), 1.0f));
    const std::uint32_t cb = c != nullptr ? bits_of(*c) : 0;
    std::uint32_t d = 0;
    mkl_avx2_gemm(bf16, a.data(), ones.data(), c != nullptr ? &cb : nullptr, &d, 1, 1, x.size());
    return float_from_bits(d);
}

}  // namespace

TEST_CASE("MKL AVX2 GEMM: K's blocks are 192, two halves below 384 and an odd K's last product alone", "[cpu-gemm]") {
    using Ends = std::vector<std::uint64_t>;
    CHECK(mkl_avx2_k_blocks(63) == Ends{63});
    CHECK(mkl_avx2_k_blocks(192) == Ends{192});
    CHECK(mkl_avx2_k_blocks(193) == Ends{96, 192, 193});
    CHECK(mkl_avx2_k_blocks(300) == Ends{150, 300});
    CHECK(mkl_avx2_k_blocks(383) == Ends{191, 382, 383});
    CHECK(mkl_avx2_k_blocks(384) == Ends{192, 384});
    CHECK(mkl_avx2_k_blocks(385) == Ends{192, 384, 385});
    CHECK(mkl_avx2_k_blocks(1000) == Ends{192, 384, 576, 768, 960, 1000});
}

TEST_CASE("MKL AVX2 GEMM: one chain in order within a block, a fresh chain in the next", "[cpu-gemm]") {
    // within 192 products: 2^24 + 1 rounds back to 2^24, then - 2^24 leaves 0
    std::vector<float> x(192, 0.0f);
    x[0] = big, x[1] = 1.0f, x[2] = -big;
    CHECK(sum(x) == 0.0f);
    // K = 300: two blocks of 150. 2^24 in the first, 1 - 2^24 (exact) in the second: 1, where one
    // chain loses the 1
    x.assign(300, 0.0f);
    x[0] = big, x[150] = 1.0f, x[151] = -big;
    CHECK(sum(x) == 1.0f);
    x[150] = 0.0f, x[149] = 1.0f, x[151] = 0.0f, x[150] = -big;  // the 1 one place back: in the first block
    CHECK(sum(x) == 0.0f);
    // K = 193: blocks of 96, 96 and 1 (not 97 and 96): element 96 opens the second
    x.assign(193, 0.0f);
    x[0] = big, x[96] = 1.0f, x[97] = -big;
    CHECK(sum(x) == 1.0f);
    // ... and the last product opens the third: -2^24, then 2^24, then 1 keeps the 1, where a
    // second block of 97 rounds 2^24 + 1 back to 2^24 (MKL's cblas_gemm_bf16bf16f32 at K = 193,
    // 255, 301 and 383: 48 to 91 of 2,048 values otherwise)
    x.assign(193, 0.0f);
    x[0] = -big, x[96] = big, x[192] = 1.0f;
    CHECK(sum(x) == 1.0f);
    // K = 400: blocks of 192 (not two halves of 200): element 192 opens the second
    x.assign(400, 0.0f);
    x[0] = big, x[192] = 1.0f, x[193] = -big;
    CHECK(sum(x) == 1.0f);
}

TEST_CASE("MKL AVX2 GEMM: C gains the blocks, and nothing flushes to zero", "[cpu-gemm]") {
    std::vector<float> x(64, 0.0f);
    x[0] = 1.0f, x[1] = -big;
    const float c = big;
    CHECK(sum(x, &c) == 1.0f);  // C + (1 - 2^24): the block's chain from +0 keeps its 1
    // a BF16 subnormal input and a subnormal product are kept, as FMA does without FTZ and DAZ
    const float tiny = float_from_bits(0x00010000u);  // the BF16 subnormal 0x0001
    CHECK(sum({tiny}) == tiny);
    CHECK(sum({tiny, tiny}) == 2.0f * tiny);
    // FP16 operands the same way (cblas_gemm_f16f16f32): the FP16 subnormal 0x0001 is 2^-24
    const std::vector<std::uint32_t> h{0x0001u, 0x0001u}, one{0x3c00u, 0x3c00u};
    std::uint32_t d = 0;
    mkl_avx2_gemm(f16, h.data(), one.data(), nullptr, &d, 1, 1, 2);
    CHECK(float_from_bits(d) == 0x1p-23f);
    CHECK(mkl_avx2_modelled(bf16, 24, 4));
    CHECK_FALSE(mkl_avx2_modelled(bf16, 23, 64));
    CHECK_FALSE(mkl_avx2_modelled(bf16, 512, 3));
}
