#include "emu/mma/onednn_gemv.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include "emu/mma/vdpbf16ps.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu {
namespace {

constexpr std::uint64_t lanes = 16, group = 8;  // a zmm of float32; innerloop_n's unroll_n

}  // namespace

float avx512_bf16_gemv_dot(const std::uint32_t* x, const std::uint32_t* a, std::uint64_t k) {
    const auto at = [&](const std::uint32_t* v, std::uint64_t t) { return t < k ? vdp::bf16_daz(v[t]) : 0.0f; };
    std::array<float, lanes> acc{};
    for (std::uint64_t s = 0; s < k; s += 2 * lanes)
        for (std::uint64_t l = 0; l < lanes; ++l) {
            const std::uint64_t t = s + 2 * l;  // past k: the masked load's zeros, a +0 product each
            acc[l] = vdp::pair(acc[l], at(x, t), at(a, t), at(x, t + 1), at(a, t + 1));
        }
    std::array<float, lanes / 2> half{};
    for (std::uint64_t l = 0; l < lanes / 2; ++l) half[l] = acc[l + 8] + acc[l];  // vextractf64x4, vaddps
    const float q0 = half[0] + half[1], q1 = half[2] + half[3], q2 = half[4] + half[5], q3 = half[6] + half[7];
    return ((q0 + q1) + (q2 + q3)) + 0.0f;  // vhaddps twice; y = fma(sum, alpha 1, +0)
}

void avx512_bf16_gemv_rows(const std::uint32_t* x, const std::uint32_t* a, const std::uint32_t* c, std::uint32_t* y,
                           std::uint64_t k, std::uint64_t n) {
    std::vector<float> out(n, 0.0f);  // beta 0: y set to +0
    for (std::uint64_t col = 0; col < n; ++col)
        if (c != nullptr) out[col] = float_from_bits(c[col]);
    for (std::uint64_t g = 0; g < k; g += group) {
        const std::uint64_t g_end = std::min(k, g + group);
        for (std::uint64_t col = 0; col < n; ++col) {
            float acc = 0.0f;
            for (std::uint64_t t = g; t < g_end; t += 2) {  // an odd group's last pair: a zero column
                const bool odd = t + 1 < g_end;
                acc = vdp::pair(acc, vdp::bf16_daz(x[t]), vdp::bf16_daz(a[t * n + col]),
                                odd ? vdp::bf16_daz(x[t + 1]) : 0.0f, odd ? vdp::bf16_daz(a[(t + 1) * n + col]) : 0.0f);
            }
            out[col] = acc + out[col];  // vfmadd231ps(y, acc, alpha 1)
        }
    }
    for (std::uint64_t col = 0; col < n; ++col) y[col] = bits_of(out[col]);
}

}  // namespace roundscope::emu
