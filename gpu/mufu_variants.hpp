#pragma once
// The GPU's special-function unit (MUFU) as PTX exposes it: the approximate exp2, log2 and
// reciprocal that `ex2.approx` and friends compile to. Their values are not published; the
// probe (gpu/mufu_probe.cu, tools/gpu/mufu) captures them over all 2^32 inputs as digests of
// 2^16-input chunks plus raw windows, from which tools/gpu/mufu fits a model.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace roundscope::gpu {

enum class MufuVariant : std::uint8_t { ex2_ftz, ex2, lg2_ftz, lg2, rcp_ftz };

inline constexpr std::array<MufuVariant, 5> mufu_variants{MufuVariant::ex2_ftz, MufuVariant::ex2, MufuVariant::lg2_ftz,
                                                          MufuVariant::lg2, MufuVariant::rcp_ftz};

/// One digest per 2^16 consecutive input patterns: chunk j covers [j << 16, (j + 1) << 16).
inline constexpr int mufu_chunk_bits = 16;
inline constexpr std::size_t mufu_chunks = std::size_t{1} << (32 - mufu_chunk_bits);

/// The PTX instruction: "ex2.approx.ftz.f32", ...
constexpr std::string_view mufu_ptx(MufuVariant v) {
    switch (v) {
        case MufuVariant::ex2_ftz:
            return "ex2.approx.ftz.f32";
        case MufuVariant::ex2:
            return "ex2.approx.f32";
        case MufuVariant::lg2_ftz:
            return "lg2.approx.ftz.f32";
        case MufuVariant::lg2:
            return "lg2.approx.f32";
        case MufuVariant::rcp_ftz:
            return "rcp.approx.ftz.f32";
    }
    return "";
}

inline std::optional<MufuVariant> find_mufu_variant(std::string_view ptx) {
    for (const MufuVariant v : mufu_variants)
        if (mufu_ptx(v) == ptx) return v;
    return std::nullopt;
}

/// A window: `count` consecutive input patterns from `first`, all kept raw (one binade of
/// float32: 2^23 inputs).
struct MufuWindow {
    std::uint32_t first;
    std::uint32_t count;
    std::string_view range;  // "(-2, -1]": the inputs, for people
};

/// The windows a fit needs (tools/gpu/mufu/mufu_model.hpp): exp2 on the binades that fix its
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
