#include "emu/mma/amx_gemm.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "emu/mma/vdpbf16ps.hpp"
#include "lib/bits.hpp"
#include "lib/fma_clones.hpp"

namespace roundscope::emu {

using vdp::bf16_daz;
using vdp::fma_ftz;
using vdp::ftz;

int amx_k_chunk(std::uint64_t k, bool packed) {
    if (!packed) return 32;
    const std::uint64_t even = k + (k % 2);
    for (int c = 32; c >= 2; c -= 2)
        if (even % static_cast<std::uint64_t>(c) == 0) return c;
    return 2;
}

ROUNDSCOPE_FMA_CLONES void amx_bf16_gemm(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                                         std::uint32_t* d, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                                         int chunk) {
    std::vector<float> bk(k * n), even(n), odd(n), out(n);
    for (std::uint64_t x = 0; x < k * n; ++x) bk[x] = bf16_daz(b[x]);
    const auto step = static_cast<std::uint64_t>(chunk);
    for (std::uint64_t i = 0; i < m; ++i) {
        for (std::uint64_t j = 0; j < n; ++j) out[j] = c != nullptr ? float_from_bits(c[i * n + j]) : 0.0f;
        for (std::uint64_t t0 = 0; t0 < k; t0 += step) {
            std::fill(even.begin(), even.end(), 0.0f);
            std::fill(odd.begin(), odd.end(), 0.0f);
            for (std::uint64_t t = t0; t < std::min(k, t0 + step); ++t) {
                const float x = bf16_daz(a[i * k + t]);
                const float* row = bk.data() + t * n;
                std::vector<float>& acc = t % 2 == 0 ? even : odd;
                for (std::uint64_t j = 0; j < n; ++j) acc[j] = fma_ftz(x, row[j], acc[j]);
            }
            // without C, the first chunk's sum is D's start (the GEMM's beta = 0: no +0 added)
            const bool first = c == nullptr && t0 == 0;
            for (std::uint64_t j = 0; j < n; ++j) {
                const float part = ftz(even[j] + odd[j]);
                out[j] = first ? part : out[j] + part;
            }
        }
        for (std::uint64_t j = 0; j < n; ++j) d[i * n + j] = bits_of(out[j]);
    }
}

std::uint64_t avx512_bf16_k_block(std::uint64_t k) {
    if (k <= 384) return k;               // bk_traditional: one block
    if (k < 2 * 768) return (k + 1) / 2;  // under two bk: two halves
    return 768;
}

namespace {

// Each element: C, then the blocks of `block` products in order, each one chain of VDPBF16PS pairs
// from +0 (without C, the first block's chain is D's start: beta = 0, no +0 added).
ROUNDSCOPE_FMA_CLONES void vdpbf16ps_blocks(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                                            std::uint32_t* d, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                                            std::uint64_t block) {
    std::vector<float> bk(k * n), acc(n), out(n);
    for (std::uint64_t x = 0; x < k * n; ++x) bk[x] = bf16_daz(b[x]);
    for (std::uint64_t i = 0; i < m; ++i) {
        for (std::uint64_t j = 0; j < n; ++j) out[j] = c != nullptr ? float_from_bits(c[i * n + j]) : 0.0f;
        for (std::uint64_t b0 = 0; b0 < k; b0 += block) {
            const std::uint64_t end = std::min(k, b0 + block);
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (std::uint64_t t0 = b0; t0 < end; t0 += 2)
                for (const std::uint64_t t : {t0 + 1, t0}) {  // the pair's odd product first
                    if (t >= end) continue;                   // past an odd block: a zero product
                    const float x = bf16_daz(a[i * k + t]);
                    const float* row = bk.data() + t * n;
                    for (std::uint64_t j = 0; j < n; ++j) acc[j] = fma_ftz(x, row[j], acc[j]);
                }
            const bool first = c == nullptr && b0 == 0;
            for (std::uint64_t j = 0; j < n; ++j) out[j] = first ? acc[j] : out[j] + acc[j];
        }
        for (std::uint64_t j = 0; j < n; ++j) d[i * n + j] = bits_of(out[j]);
    }
}

}  // namespace

void avx512_bf16_gemm(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c, std::uint32_t* d,
                      std::uint64_t m, std::uint64_t n, std::uint64_t k) {
    vdpbf16ps_blocks(a, b, c, d, m, n, k, avx512_bf16_k_block(k));
}

void avx512_bf16_brgemm(const std::uint32_t* a, const std::uint32_t* b, std::uint32_t* d, std::uint64_t m,
                        std::uint64_t n, std::uint64_t k) {
    vdpbf16ps_blocks(a, b, nullptr, d, m, n, k, std::max<std::uint64_t>(k, 1));
}

}  // namespace roundscope::emu
