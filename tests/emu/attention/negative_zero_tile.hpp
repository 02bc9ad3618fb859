#pragma once
// A problem built to drive the running O to -0 on a head's last, partial KV tile: one query, 100
// keys (one tile of 128, partial), D = 64. Key 0 holds the maximum and V = -0; the other 99
// keys' P-bar (about 2^-104) times V = -2^-120 underflow, so every product is -0 or a negative
// below float32's smallest subnormal. Exact arithmetic rounded to nearest would give -0, which a
// zero k-step past the keys (pv_depth=tile) would turn into +0; the tensor-core models give +0.
#include <cstdint>

#include "emu/attention/flash/flash_attention.hpp"

namespace roundscope::test {

inline constexpr std::uint32_t bf16_one = 0x3F80, bf16_minus_zero = 0x8000;

inline emu::AttentionShape negative_zero_shape() {
    emu::AttentionShape s;
    s.heads = 1, s.n_q = 1, s.n_kv = 100, s.d = s.d_v = 64, s.scale = 0.125f;
    return s;
}

inline emu::AttentionOperands negative_zero_operands() {
    const emu::AttentionShape s = negative_zero_shape();
    emu::AttentionOperands in;
    in.q.assign(s.d, 0), in.k.assign(s.n_kv * s.d, 0), in.v.assign(s.n_kv * s.d_v, 0);
    in.q[0] = bf16_one;  // score = k[j][0]
    for (std::uint64_t j = 0; j < s.n_kv; ++j) {
        in.k[j * s.d] = j == 0 ? 0x4280u : 0xC400u;  // 64, or -512
        for (std::uint64_t c = 0; c < s.d_v; ++c) in.v[j * s.d_v + c] = j == 0 ? bf16_minus_zero : 0x8380u;  // -2^-120
    }
    in.d_o.assign(s.d_v, 0);
    return in;
}

}  // namespace roundscope::test
