#pragma once
// Block-scaled formats: a block of elements in a narrow format sharing one scale. One
// descriptor each, like format.hpp's; the algorithms are mx_block.hpp and nvfp4_block.hpp.
#include <string_view>

#include "emu/block/mx_scale.hpp"
#include "emu/numbers/format.hpp"

namespace roundscope::emu {

struct BlockFormat {
    std::string_view name;
    const Format* element;
    const Format* scale;
    int default_block;
    bool nvfp4;  // two-level NVFP4 scaling (nvfp4_block.hpp) rather than OCP MX (mx_block.hpp)
};

// OCP MX v1.0, section 5 (concrete MX-compliant formats), block size 32, E8M0 scales.
inline constexpr BlockFormat mxfp8_e4m3{"mxfp8_e4m3", &e4m3, &e8m0, 32, false};
inline constexpr BlockFormat mxfp8_e5m2{"mxfp8_e5m2", &e5m2, &e8m0, 32, false};
inline constexpr BlockFormat mxfp6_e2m3{"mxfp6_e2m3", &e2m3, &e8m0, 32, false};
inline constexpr BlockFormat mxfp6_e3m2{"mxfp6_e3m2", &e3m2, &e8m0, 32, false};
inline constexpr BlockFormat mxfp4{"mxfp4", &e2m1, &e8m0, 32, false};
inline constexpr BlockFormat mxint8{"mxint8", &int8, &e8m0, 32, false};
/// NVIDIA NVFP4: 16 E2M1 elements, a UE4M3 block scale and a float32 per-tensor scale.
inline constexpr BlockFormat nvfp4{"nvfp4", &e2m1, &ue4m3, 16, true};

inline constexpr BlockFormat all_block_formats[] = {mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2,
                                                    mxfp4,      mxint8,     nvfp4};

/// The block format called `name`; an Error naming it and the block formats otherwise.
const BlockFormat& block_format_named(std::string_view name);

/// "floor", "ceil", "even", "rceil".
std::string_view scale_rule_name(ScaleRule r);
/// The rule of that name; an Error (naming `option` where it is not empty) and the rules if unknown.
ScaleRule parse_scale_rule(std::string_view name, std::string_view option);
inline constexpr ScaleRule all_scale_rules[] = {ScaleRule::floor, ScaleRule::ceil, ScaleRule::even, ScaleRule::rceil};

}  // namespace roundscope::emu
