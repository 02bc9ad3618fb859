#pragma once
// The tests' reference for wgmma: random BF16 or E4M3 problems and D = A B + C element by element
// from the sm_90 wgmma model over k16 (E4M3: k32) chunks, written apart from the simulated warpgroup
// (gpu/host/simt_wgmma.cpp) and the layout probe (gpu/probes/wgmma_layout_probe.cu).
#include <cstdint>
#include <random>
#include <vector>

#include "emu/mma/fused_dot_add.hpp"
#include "emu/mma/mma_model.hpp"
#include "lib/bits.hpp"

namespace roundscope::test {

// Row-major matrices of BF16 (or E4M3) bits (A 64 x K, B as N x K) and float C (64 x N).
struct WgmmaProblem {
    int n, k;
    std::vector<std::uint32_t> a, b;
    std::vector<float> c;
    const emu::Format* input = &emu::bf16;
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

// E4M3 operands: every finite pattern of either sign, NaN (0x7F, 0xFF) left out, with C as above.
inline WgmmaProblem random_wgmma_problem_e4m3(int n, int k, unsigned seed) {
    WgmmaProblem p = random_wgmma_problem(n, k, seed);
    std::mt19937 rng(seed + 1000);
    std::uniform_int_distribution<std::uint32_t> byte(0, 253);  // 0x00-0x7E, 0x80-0xFE
    auto e4m3_bits = [&] {
        const std::uint32_t x = byte(rng);
        return x < 127 ? x : x + 1;
    };
    for (auto& x : p.a) x = e4m3_bits();
    for (auto& x : p.b) x = e4m3_bits();
    p.input = &emu::e4m3;
    return p;
}

inline std::vector<float> wgmma_reference(const WgmmaProblem& p, bool scale_d) {
    const emu::MmaModel& m = *emu::find_mma_model("sm90", "wgmma", *p.input, *p.input, emu::f32);
    const int depth = p.input->bits == 8 ? 32 : 16;
    std::vector<float> d(p.c.size());
    for (int r = 0; r < 64; ++r)
        for (int c = 0; c < p.n; ++c) {
            std::uint32_t acc = scale_d ? bits_of(p.c[static_cast<std::size_t>(r * p.n + c)]) : 0;
            for (int k0 = 0; k0 < p.k; k0 += depth)
                acc = emu::mma_dot(m, &p.a[static_cast<std::size_t>(r * p.k + k0)],
                                   &p.b[static_cast<std::size_t>(c * p.k + k0)], 1, depth, acc);
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
