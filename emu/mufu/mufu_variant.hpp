#pragma once
// The approximate functions of the GPU's special-function unit (MUFU) as PTX exposes them:
// ex2.approx, lg2.approx and rcp.approx, whose values NVIDIA does not publish. The probe
// (gpu/probes/mufu_probe.cu, tools/gpu/mufu) captures them; emu/mufu/mufu_model.hpp evaluates a fitted
// model; emu/mufu/h100_mufu.hpp is an H100's, bit-exact on all 2^32 inputs.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace roundscope::emu {

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

}  // namespace roundscope::emu
