#pragma once
// The tests' reference for OCP MX blocks: n values (bits of `f`, `stride` apart) through blocks of
// 32 from the first, one block at a time by mx_block.hpp's scalar path (floor scale rule,
// nearest-even elements); the dequantized values as bits of `to`. Written apart from the batch
// path the emulator quantizes with (block_fake_quantized).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "emu/block/block_format.hpp"
#include "emu/block/mx_block.hpp"
#include "emu/numbers/round.hpp"
#include "emu/numbers/unpack.hpp"

namespace roundscope::test {

inline std::vector<std::uint32_t> mx_blocks(const std::uint32_t* x, std::size_t n, std::size_t stride,
                                            const emu::Format& f, const emu::BlockFormat& b, const emu::Format& to) {
    using namespace emu;
    std::vector<std::uint32_t> out(n);
    for (std::size_t s = 0; s < n; s += 32) {
        const int len = static_cast<int>(std::min<std::size_t>(32, n - s));
        std::vector<Unpacked> u(static_cast<std::size_t>(len));
        std::vector<std::uint64_t> index(u.size(), 0), elements(u.size());
        for (int t = 0; t < len; ++t)
            u[static_cast<std::size_t>(t)] = unpack(f, x[(s + static_cast<std::size_t>(t)) * stride]);
        const std::uint64_t scale = mx_quantize_block(u.data(), len, *b.element, ScaleRule::floor, CastOptions{},
                                                      index.data(), elements.data());
        for (int t = 0; t < len; ++t)
            out[s + static_cast<std::size_t>(t)] = static_cast<std::uint32_t>(cast_from_f64(
                mx_dequantize(*b.element, elements[static_cast<std::size_t>(t)], scale), to, CastOptions{}));
    }
    return out;
}

}  // namespace roundscope::test
