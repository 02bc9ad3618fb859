// The BF16 GEMV that ATen's one-row and one-key GEMMs run on AVX512-BF16 (emu/mma/onednn_gemv.hpp):
// the dot's 16 lanes and their reduction tree, and the row kernel's groups of 8, each shown by
// values whose sum depends on the order (2^24 + 1 is a tie that rounds back to 2^24; 1 - 2^24 is
// exact). Against torch itself: tests/peer/test_aten_cpu_torch.py.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "emu/mma/onednn_gemv.hpp"
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

float dot(const std::vector<float>& x) {
    const std::vector<std::uint32_t> a = bf16_bits(x), ones = bf16_bits(std::vector<float>(x.size(), 1.0f));
    return avx512_bf16_gemv_dot(a.data(), ones.data(), x.size());
}

float rows(const std::vector<float>& column, const std::uint32_t* c = nullptr) {
    const std::vector<std::uint32_t> a = bf16_bits(column), ones = bf16_bits(std::vector<float>(column.size(), 1.0f));
    std::uint32_t y = 0;
    avx512_bf16_gemv_rows(ones.data(), a.data(), c, &y, column.size(), 1);
    return float_from_bits(y);
}

}  // namespace

TEST_CASE("AVX512-BF16 GEMV dot: lanes l and l + 8 are added first, then neighbours", "[cpu-gemm]") {
    // elements 0, 2 and 16 fall in lanes 0, 1 and 8: (1 + 2^24) + (-2^24) = 0 by the kernel's tree;
    // one chain over the elements, or the lanes summed in order or by neighbours, gives 1
    std::vector<float> x(32, 0.0f);
    x[0] = big, x[2] = -big, x[16] = 1.0f;
    CHECK(dot(x) == 0.0f);
    // the 1 in lane 2 instead meets the 2^24s only after they have cancelled
    x[16] = 0.0f, x[4] = 1.0f;
    CHECK(dot(x) == 1.0f);
}

TEST_CASE("AVX512-BF16 GEMV dot: a lane is one chain across blocks of 32, the tail padded", "[cpu-gemm]") {
    // elements 0 and 32 share lane 0: 2^24 + 1 rounds back to 2^24 there, and element 33 (lane 0's
    // odd one, added first in its pair) is lost the same way; a separate accumulator per block
    // of 32 would keep both
    std::vector<float> x(34, 0.0f);  // 34: a tail of 2, the rest of the block zeros
    x[0] = big, x[32] = 1.0f, x[33] = 1.0f;
    CHECK(dot(x) == big);
    CHECK(dot({1.0f, 2.0f, 3.0f}) == 6.0f);
}

TEST_CASE("AVX512-BF16 GEMV rows: groups of 8, each a chain from +0 added to y", "[cpu-gemm]") {
    // group two: -2^24, then (-1, 1) odd first: -2^24 - 1 ties back to -2^24, + 1 = 1 - 2^24;
    // y = 1 + (1 - 2^24) = 2 - 2^24. One chain over 16 (or groups of 2 or 4, or the even product
    // first) gives 1 - 2^24
    std::vector<float> v(16, 0.0f);
    v[3] = 1.0f, v[10] = -big, v[14] = 1.0f, v[15] = -1.0f;
    CHECK(rows(v) == 2.0f - big);
    // with C: y starts from it, and a group of 3 ends in a pair with a zero
    const std::uint32_t c = bits_of(big);
    CHECK(rows({1.0f, 1.0f, 1.0f}, &c) == big + 4.0f);  // (1 + 1) + 1 = 3 from +0, then 2^24 + 3 = 2^24 + 4 (tie)
}
