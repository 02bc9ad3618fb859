#include "emu/attention/flash/math_path_operands.hpp"

#include <cmath>

#include "emu/numbers/f32_arith.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu::detail {

float math_path_root_scale(const AttentionShape& shape) {
    const double by_d = 1.0 / std::sqrt(static_cast<double>(shape.d));
    const double scale = shape.scale_given != 0 && static_cast<float>(shape.scale_given) == shape.scale
                             ? shape.scale_given
                         : static_cast<float>(by_d) == shape.scale ? by_d
                                                                   : static_cast<double>(shape.scale);
    return static_cast<float>(std::sqrt(scale));
}

std::vector<std::uint32_t> math_path_scaled(const std::uint32_t* x, std::uint64_t count, const Format& f,
                                            float factor) {
    std::vector<std::uint32_t> out(count);
    for (std::uint64_t i = 0; i < count; ++i)
        out[i] = bits_of(f32_arith::mul(static_cast<float>(decode(f, x[i])), factor));
    return out;
}

}  // namespace roundscope::emu::detail
