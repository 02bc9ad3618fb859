#pragma once
// The tests' reference for wgmma: random BF16 problems and D = A B + C element by element from
// the sm_90 wgmma model over k16 chunks, written apart from the simulated warpgroup
// (gpu/host/simt_wgmma.cpp) and the layout probe (gpu/probes/wgmma_layout_probe.cu).
#include <cstdint>
#include <random>
#include <vector>

#include "emu/mma/fused_dot_add.hpp"
#include "emu/mma/mma_model.hpp"
#include "lib/bits.hpp"

namespace roundscope::test {

// Row-major matrices of BF16 bits (A 64 x K, B as N x K) and float C (64 x N).
struct WgmmaProblem {
    int n, k;
    std::vector<std::uint32_t> a, b;
    std::vector<float> c;
};

inline WgmmaProblem random_wgmma_problem(int n, int k, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    auto bf16_bits = [&] { return bits_of(normal(rng)) >> 16; };  // truncated to BF16: exact
    WgmmaProblem p{n, k, std::vector<std::uint32_t>(64 * static_cast<std::size_t>(k)),
                   std::vector<std::uint32_t>(static_cast<std::size_t>(n) * k),
                   std::vector<float>(64 * static_cast<std::size_t>(n))};
    for (auto& x : p.a) x = bf16_bits();
    for (auto& x : p.b) x = bf16_bits();
    for (auto& x : p.c) x = normal(rng);
    return p;
}

inline std::vector<float> wgmma_reference(const WgmmaProblem& p, bool scale_d) {
    const emu::MmaModel& m = *emu::find_mma_model("sm90", "wgmma", emu::bf16, emu::bf16, emu::f32);
    std::vector<float> d(p.c.size());
    for (int r = 0; r < 64; ++r)
        for (int c = 0; c < p.n; ++c) {
            std::uint32_t acc = scale_d ? bits_of(p.c[static_cast<std::size_t>(r * p.n + c)]) : 0;
            for (int k0 = 0; k0 < p.k; k0 += 16)
                acc = emu::mma_dot(m, &p.a[static_cast<std::size_t>(r * p.k + k0)],
                                   &p.b[static_cast<std::size_t>(c * p.k + k0)], 1, 16, acc);
            d[static_cast<std::size_t>(r * p.n + c)] = float_from_bits(acc);
        }
    return d;
}

inline std::size_t differing_floats(const std::vector<float>& x, const std::vector<float>& y) {
    if (x.size() != y.size()) return ~std::size_t{0};
    std::size_t n = 0;
    for (std::size_t i = 0; i < x.size(); ++i) n += bits_of(x[i]) != bits_of(y[i]);
    return n;
}

}  // namespace roundscope::test
