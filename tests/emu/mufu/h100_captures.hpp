#pragma once
// The H100's MUFU captures (tests/data/golden/h100/mufu, extracted by the CTest fixture
// h100_mufu into ROUNDSCOPE_H100_MUFU_DIR) and the functions the emulator computes for each.
#include <cstdint>
#include <string>

#include "emu/attention/math/softmax_choices.hpp"
#include "emu/mufu/h100_mufu.hpp"
#include "lib/bits.hpp"
#include "tools/gpu/mufu/mufu_capture.hpp"

namespace roundscope::test {

inline gpu::MufuCapture h100_capture(emu::MufuVariant v) {
    return gpu::read_mufu_capture(std::string(ROUNDSCOPE_H100_MUFU_DIR) + "/mufu/mufu_" +
                                  std::string(emu::mufu_ptx(v)) + ".safetensors");
}

/// What the emulator gives for `variant`: the built-in models (rcp through mufu_rcp_ftz, FlashAttention-3's
/// 1 / l), the non-ftz ones behind the guards of softmax_choices.hpp (exp2f, lg2.approx.f32).
inline std::uint32_t emulated(emu::MufuVariant variant, std::uint32_t x) {
    const float f = float_from_bits(x);
    switch (variant) {
        case emu::MufuVariant::ex2_ftz:
            return bits_of(emu::h100_ex2_ftz(f));
        case emu::MufuVariant::ex2:
            return bits_of(emu::cuda_exp2f(f));
        case emu::MufuVariant::lg2_ftz:
            return bits_of(emu::h100_lg2_ftz(f));
        case emu::MufuVariant::lg2:
            return bits_of(emu::cuda_log2f(f));
        case emu::MufuVariant::rcp_ftz:
            return bits_of(emu::mufu_rcp_ftz(f));
    }
    return 0;
}

}  // namespace roundscope::test
