#include "emu/mma/mkl_avx2_gemm.hpp"

#include <algorithm>
#include <cmath>

#include "emu/numbers/unpack.hpp"
#include "lib/bits.hpp"
#include "lib/fma_clones.hpp"

namespace roundscope::emu {

std::vector<std::uint64_t> mkl_avx2_k_blocks(std::uint64_t k) {
    constexpr std::uint64_t block = 192;
    if (k <= block) return {k};
    if (k < 2 * block) {
        // two halves of k / 2; an odd k's last product is a block of one, added after them
        std::vector<std::uint64_t> ends{k / 2, k / 2 * 2};
        if (k % 2 != 0) ends.push_back(k);
        return ends;
    }
    std::vector<std::uint64_t> ends;
    for (std::uint64_t end = block; end < k + block; end += block) ends.push_back(std::min(end, k));
    return ends;
}

ROUNDSCOPE_FMA_CLONES void mkl_avx2_gemm(const Format& in, const std::uint32_t* a, const std::uint32_t* b,
                                         const std::uint32_t* c, std::uint32_t* d, std::uint64_t m, std::uint64_t n,
                                         std::uint64_t k, float b_scale) {
    const std::vector<std::uint64_t> ends = mkl_avx2_k_blocks(k);
    std::vector<float> bk(k * n), acc(n), out(n);
    for (std::uint64_t x = 0; x < k * n; ++x) bk[x] = static_cast<float>(decode(in, b[x])) * b_scale;
    for (std::uint64_t i = 0; i < m; ++i) {
        for (std::uint64_t j = 0; j < n; ++j) out[j] = c != nullptr ? float_from_bits(c[i * n + j]) : 0.0f;
        std::uint64_t start = 0;
        for (const std::uint64_t end : ends) {
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (std::uint64_t t = start; t < end; ++t) {
                const float x = static_cast<float>(decode(in, a[i * k + t]));
                const float* row = bk.data() + t * n;
                for (std::uint64_t j = 0; j < n; ++j) acc[j] = std::fma(x, row[j], acc[j]);
            }
            // without C, the first block's chain is D's start (beta = 0: no +0 added)
            const bool first = c == nullptr && start == 0;
            for (std::uint64_t j = 0; j < n; ++j) out[j] = first ? acc[j] : out[j] + acc[j];
            start = end;
        }
        for (std::uint64_t j = 0; j < n; ++j) d[i * n + j] = bits_of(out[j]);
    }
}

}  // namespace roundscope::emu
