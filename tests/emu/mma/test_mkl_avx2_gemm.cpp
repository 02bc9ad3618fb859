// MKL's BF16 GEMM as it runs on an AMD CPU (emu/mma/mkl_avx2_gemm.hpp): one float32 chain over K in
// order, K's blocks (192; two halves below 384), C before the blocks, subnormals kept. Each rule
// is shown by values whose sum depends on it (2^24 + 1 is a tie that rounds back to 2^24; 1 -
// 2^24 is exact). Against torch itself: tests/peer/test_aten_cpu_torch.py on an AMD CPU.
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
    mkl_avx2_bf16_gemm(a.data(), ones.data(), c != nullptr ? &cb : nullptr, &d, 1, 1, x.size());
    return float_from_bits(d);
}

}  // namespace

TEST_CASE("MKL AVX2 GEMM: K's blocks are 192, two halves below 384", "[cpu-gemm]") {
    CHECK(mkl_avx2_k_block(64) == 64);
    CHECK(mkl_avx2_k_block(192) == 192);
    CHECK(mkl_avx2_k_block(193) == 96);  // 96, then 97
    CHECK(mkl_avx2_k_block(383) == 191);
    CHECK(mkl_avx2_k_block(384) == 192);
    CHECK(mkl_avx2_k_block(1000) == 192);
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
    // K = 193: blocks of 96 and 97 (not 97 and 96): element 96 opens the second
    x.assign(193, 0.0f);
    x[0] = big, x[96] = 1.0f, x[97] = -big;
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
    CHECK(mkl_avx2_modelled(24, 4));
    CHECK_FALSE(mkl_avx2_modelled(23, 64));
    CHECK_FALSE(mkl_avx2_modelled(512, 3));
}
