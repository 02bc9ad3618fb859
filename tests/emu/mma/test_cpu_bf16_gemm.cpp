// oneDNN's BF16 GEMM on AVX512-BF16 (emu/mma/amx_gemm.hpp): its K blocks as the gemm driver cuts
// them, and the order inside a VDPBF16PS pair (the odd product first), each shown by products
// that cancel so that the order shows in the sum. Its bits against torch itself:
// tests/peer/test_aten_cpu_torch.py and the captures of tests/python/test_torch_cpu_golden.py.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "emu/mma/amx_gemm.hpp"
#include "lib/bits.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

std::uint32_t bf16_of(float x) { return bits_of(x) >> 16; }  // exact for the values used here

float one_by_k(const std::vector<float>& a, const std::vector<float>& b) {
    std::vector<std::uint32_t> pa, pb;
    for (float x : a) pa.push_back(bf16_of(x));
    for (float x : b) pb.push_back(bf16_of(x));
    std::uint32_t d = 0;
    avx512_bf16_gemm(pa.data(), pb.data(), nullptr, &d, 1, 1, a.size());
    return float_from_bits(d);
}

}  // namespace

TEST_CASE("AVX512-BF16 GEMM: K blocks as oneDNN's gemm driver cuts them", "[cpu-gemm]") {
    CHECK(avx512_bf16_k_block(64) == 64);
    CHECK(avx512_bf16_k_block(384) == 384);  // bk_traditional: one block
    CHECK(avx512_bf16_k_block(385) == 193);  // two halves, the first the larger
    CHECK(avx512_bf16_k_block(512) == 256);
    CHECK(avx512_bf16_k_block(1535) == 768);  // below twice bk
    CHECK(avx512_bf16_k_block(1536) == 768);
    CHECK(avx512_bf16_k_block(5000) == 768);
}

TEST_CASE("AVX512-BF16 GEMM: a pair's odd product is added first, each addition rounded", "[cpu-gemm]") {
    const float big = 16777216.0f;  // 2^24, where 2^24 + 1 is a tie that rounds back to 2^24
    // pairs (1, 2^24), (-2^24, 1): odd first, 2^24, 2^24 (+1 lost), 2^24 (+1 lost), 0; even first
    // would give 1, 2^24, 0, 1
    CHECK(one_by_k({1.0f, big, -big, 1.0f}, {1, 1, 1, 1}) == 0.0f);
    // pairs (2^24, 1), (1, -2^24): odd first, 1, 2^24, 0, 1; even first would give 0
    CHECK(one_by_k({big, 1.0f, 1.0f, -big}, {1, 1, 1, 1}) == 1.0f);
}

TEST_CASE("AVX512-BF16 GEMM: each block's chain starts from +0 and D gains the blocks in order", "[cpu-gemm]") {
    // K = 390: two blocks of 195. Block one sums 1 + 1 = 2, block two 2^24 + 1 = 2^24 (the tie
    // to even), and D = 2 + 2^24 exactly; one chain over K would give ((2 + 2^24) + 1) = 2^24 + 4.
    std::vector<float> a(390, 0.0f), b(390, 1.0f);
    a[0] = a[2] = 1.0f;
    a[195] = 16777216.0f, a[197] = 1.0f;
    CHECK(one_by_k(a, b) == 16777218.0f);
}

TEST_CASE("AVX512-BF16 brgemm: one chain over the whole of K, where the GEMM cuts two blocks", "[cpu-gemm]") {
    // K = 512: the GEMM sums 2^24 in its first block of 256 and 1 + 1 in its second, then adds
    // them (2^24 + 2, exact); oneDNN's brgemm (ATen's backward) runs one chain, which loses each 1
    // to the tie at 2^24
    std::vector<float> a(512, 0.0f), b(512, 1.0f);
    a[0] = 16777216.0f, a[256] = 1.0f, a[258] = 1.0f;
    std::vector<std::uint32_t> pa, pb;
    for (float x : a) pa.push_back(bf16_of(x));
    for (float x : b) pb.push_back(bf16_of(x));
    std::uint32_t d = 0;
    avx512_bf16_brgemm(pa.data(), pb.data(), &d, 1, 1, 512);
    CHECK(float_from_bits(d) == 16777216.0f);
    CHECK(one_by_k(a, b) == 16777218.0f);
}
