#include "emu/mma/mkl_avx2_gemm.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "emu/numbers/unpack.hpp"
#include "lib/bits.hpp"
#include "lib/fma_clones.hpp"

namespace roundscope::emu {

std::uint64_t mkl_avx2_k_block(std::uint64_t k) {
    if (k <= 192) return std::max<std::uint64_t>(k, 1);
    if (k < 2 * 192) return k / 2;  // two blocks: k / 2, then k - k / 2
    return 192;
}

ROUNDSCOPE_FMA_CLONES void mkl_avx2_bf16_gemm(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                                              std::uint32_t* d, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                                              float b_scale) {
    const std::uint64_t block = mkl_avx2_k_block(k);
    std::vector<float> bk(k * n), acc(n), out(n);
    for (std::uint64_t x = 0; x < k * n; ++x) bk[x] = static_cast<float>(decode(bf16, b[x])) * b_scale;
    for (std::uint64_t i = 0; i < m; ++i) {
        for (std::uint64_t j = 0; j < n; ++j) out[j] = c != nullptr ? float_from_bits(c[i * n + j]) : 0.0f;
        // the second block of a split below 384 is the longer one: k - k / 2
        for (std::uint64_t b0 = 0; b0 < k; b0 += block) {
            const std::uint64_t end = (k < 2 * 192 && b0 > 0) ? k : std::min(k, b0 + block);
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (std::uint64_t t = b0; t < end; ++t) {
                const float x = static_cast<float>(decode(bf16, a[i * k + t]));
                const float* row = bk.data() + t * n;
                for (std::uint64_t j = 0; j < n; ++j) acc[j] = std::fma(x, row[j], acc[j]);
            }
            // without C, the first block's chain is D's start (beta = 0: no +0 added)
            const bool first = c == nullptr && b0 == 0;
            for (std::uint64_t j = 0; j < n; ++j) out[j] = first ? acc[j] : out[j] + acc[j];
            if (end == k) break;
        }
        for (std::uint64_t j = 0; j < n; ++j) d[i * n + j] = bits_of(out[j]);
    }
}

}  // namespace roundscope::emu
