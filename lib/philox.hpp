#pragma once
// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
// SC'11), the counter-based generator used for every random bit in roundscope. The same
// (key, counter) gives the same bits on CPU and GPU, whatever the thread count.
#include <array>
#include <cstdint>

#include "lib/host_device.hpp"

namespace roundscope {

using PhiloxBlock = std::array<std::uint32_t, 4>;

ROUNDSCOPE_HD constexpr PhiloxBlock philox4x32_10(PhiloxBlock ctr, std::uint32_t key0, std::uint32_t key1) {
    // Multipliers and Weyl increments from the paper (Table 2 and Section 4.1).
    constexpr std::uint64_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
    constexpr std::uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
        const std::uint64_t p0 = M0 * ctr[0];
        const std::uint64_t p1 = M1 * ctr[2];
        ctr = {static_cast<std::uint32_t>(p1 >> 32) ^ ctr[1] ^ key0, static_cast<std::uint32_t>(p1),
               static_cast<std::uint32_t>(p0 >> 32) ^ ctr[3] ^ key1, static_cast<std::uint32_t>(p0)};
        key0 += W0;
        key1 += W1;
    }
    return ctr;
}

/// The random stream of one element: 32-bit words w(0), w(1), ... that depend only on the
/// seed and the element's index. Element i takes lane i % 4 of the Philox block whose
/// counter is (i / 4, draw k), so four neighbouring elements share one Philox call (which is
/// what lets the SIMD path produce 4 elements' bits per block).
struct RandomStream {
    std::uint64_t seed = 0;
    std::uint64_t index = 0;

    ROUNDSCOPE_HD constexpr std::uint32_t word(std::uint32_t k) const {
        const std::uint64_t block = index >> 2;
        const PhiloxBlock out =
            philox4x32_10({static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), k, 0u},
                          static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
        return out[index & 3];
    }
};

}  // namespace roundscope
