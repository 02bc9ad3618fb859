// SIMD Philox4x32-10: one lane per Philox block, four words per block, interleaved on store so
// that element i receives lane i % 4 of block i / 4, exactly as the scalar RandomStream does.
#include "lib/philox_batch.hpp"

#include <vector>

#include "lib/philox.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/philox_batch.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace roundscope::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
template <class D, class V>
HWY_INLINE void mul_hi_lo(D du, V a, std::uint32_t m, V& hi, V& lo) {
    const hn::Repartition<std::uint64_t, D> du64;
    const V mv = hn::Set(du, m);
    const auto even = hn::MulEven(a, mv);
    const auto odd = hn::MulEven(hn::BitCast(du, hn::ShiftRight<32>(hn::BitCast(du64, a))), mv);
    hi = hn::OddEven(hn::BitCast(du, odd), hn::BitCast(du, hn::ShiftRight<32>(even)));
    lo = hn::Mul(a, mv);
}
#endif

// Words of blocks [first_block, first_block + blocks) into out[4 * j + lane].
void PhiloxBlocks(std::uint64_t seed, std::uint64_t first_block, std::size_t blocks, std::uint32_t k,
                  std::uint32_t* HWY_RESTRICT out) {
    std::size_t j = 0;
#if HWY_TARGET != HWY_SCALAR  // the 1-lane target has no 64-bit lane pairs for MulEven
    const hn::ScalableTag<std::uint32_t> du;
    const std::size_t lanes = hn::Lanes(du);
    for (; j + lanes <= blocks; j += lanes) {
        const std::uint64_t base = first_block + j;
        const auto lo_base = static_cast<std::uint32_t>(base);
        auto x0 = hn::Iota(du, lo_base);
        // Lanes whose low word wrapped past 2^32 carry into the high word.
        auto x1 = hn::Add(hn::Set(du, static_cast<std::uint32_t>(base >> 32)),
                          hn::IfThenElseZero(hn::Lt(x0, hn::Set(du, lo_base)), hn::Set(du, 1u)));
        auto x2 = hn::Set(du, k);
        auto x3 = hn::Zero(du);
        std::uint32_t key0 = static_cast<std::uint32_t>(seed), key1 = static_cast<std::uint32_t>(seed >> 32);
        for (int round = 0; round < 10; ++round) {
            decltype(x0) hi0, lo0, hi1, lo1;
            mul_hi_lo(du, x0, 0xD2511F53u, hi0, lo0);
            mul_hi_lo(du, x2, 0xCD9E8D57u, hi1, lo1);
            x0 = hn::Xor(hn::Xor(hi1, x1), hn::Set(du, key0));
            x1 = lo1;
            x2 = hn::Xor(hn::Xor(hi0, x3), hn::Set(du, key1));
            x3 = lo0;
            key0 += 0x9E3779B9u;
            key1 += 0xBB67AE85u;
        }
        hn::StoreInterleaved4(x0, x1, x2, x3, du, out + 4 * j);
    }
#endif
    for (; j < blocks; ++j) {
        const std::uint64_t b = first_block + j;
        const PhiloxBlock w = philox4x32_10({static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(b >> 32), k, 0u},
                                            static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
        for (int l = 0; l < 4; ++l) out[4 * j + l] = w[l];
    }
}

}  // namespace roundscope::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace roundscope {
HWY_EXPORT(PhiloxBlocks);

void philox_words(std::uint64_t seed, std::uint64_t first_index, std::size_t n, std::uint32_t k, std::uint32_t* out) {
    if (n == 0) return;
    const std::uint64_t first_block = first_index >> 2;
    const std::size_t offset = first_index & 3;
    const std::size_t blocks = (offset + n + 3) / 4;
    thread_local std::vector<std::uint32_t> buffer;
    buffer.resize(4 * blocks);
    HWY_DYNAMIC_DISPATCH(PhiloxBlocks)(seed, first_block, blocks, k, buffer.data());
    for (std::size_t i = 0; i < n; ++i) out[i] = buffer[offset + i];
}

}  // namespace roundscope
#endif
