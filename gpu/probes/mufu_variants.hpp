#pragma once
// The GPU's special-function unit (MUFU) as PTX exposes it: the approximate exp2, log2 and
// reciprocal that `ex2.approx` and friends compile to. Their values are not published; the
// probe (gpu/probes/mufu_probe.cu, tools/gpu/mufu) captures them over all 2^32 inputs as digests of
// 2^16-input chunks plus raw windows, from which tools/gpu/mufu fits a model.
#include <cstdint>
#include <string_view>
#include <vector>

#include "emu/mufu/mufu_variant.hpp"

namespace roundscope::gpu {

// The variants, their chunks and PTX names: emu/mufu/mufu_variant.hpp (the emulator evaluates
// the fitted units too).
using emu::find_mufu_variant;
using emu::mufu_chunk_bits;
using emu::mufu_chunks;
using emu::mufu_ptx;
using emu::mufu_variants;
using emu::MufuVariant;

/// A window: `count` consecutive input patterns from `first`, all kept raw (one binade of
/// float32: 2^23 inputs).
struct MufuWindow {
    std::uint32_t first;
    std::uint32_t count;
    std::string_view range;  // "(-2, -1]": the inputs, for people
};

/// The windows a fit needs (tools/gpu/mufu/mufu_fitting.hpp): exp2 on the binades that fix its
/// table and input quantisation, and the non-ftz guard below -126; log2 on three binades around
/// 1; the reciprocal on [1, 2).
inline std::vector<MufuWindow> mufu_windows(MufuVariant v) {
    constexpr std::uint32_t binade = 1u << 23;
    switch (v) {
        case MufuVariant::ex2_ftz:
        case MufuVariant::ex2: {
            std::vector<MufuWindow> w{{0xBF800000u, binade, "(-2, -1]"},
                                      {0xBF000000u, binade, "(-1, -0.5]"},
                                      {0xBE800000u, binade, "(-0.5, -0.25]"},
                                      {0x3F800000u, binade, "[1, 2)"},
                                      {0xC2800000u, binade, "(-128, -64]"}};
            if (v == MufuVariant::ex2) w.push_back({0xC3000000u, binade, "(-256, -128]"});
            return w;
        }
        case MufuVariant::lg2_ftz:
        case MufuVariant::lg2:
            return {
                {0x3F000000u, binade, "[0.5, 1)"}, {0x3F800000u, binade, "[1, 2)"}, {0x40000000u, binade, "[2, 4)"}};
        case MufuVariant::rcp_ftz:
            return {{0x3F800000u, binade, "[1, 2)"}};
    }
    return {};
}

}  // namespace roundscope::gpu
