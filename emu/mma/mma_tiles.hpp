#pragma once
// Random MMA tiles in the ten input distributions of the golden vectors (docs/golden-vectors.md): what `roundscope
// probe` feeds the GPU, and what tests feed the models. Each distribution aims at one part of the model: layout,
// rounding, alignment, cancellation, the bottom and top of the range, special values.
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "emu/mma/mma_model.hpp"

namespace roundscope::emu {

inline constexpr std::array<std::string_view, 10> tile_distributions = {
    "easy", "normal", "wide", "cancel", "tiny", "huge", "specials", "align", "attention_pv", "subnormal_mix"};

/// "0=easy,1=normal,...": the `dists` metadata of a tile file.
std::string tile_distribution_metadata();

struct MmaTiles {
    std::vector<std::uint32_t> a, b, c;  // [tiles][m][k], [tiles][k][n], [tiles][m][n], as bit patterns
    std::vector<std::uint8_t> dist;      // [tiles]
    std::int64_t tiles = 0, m = 0, n = 0, k = 0;
};

/// `per_distribution` tiles of each distribution, m x n outputs of depth k, in the model's
/// input and accumulator formats; the same tiles for the same seed on every machine.
MmaTiles generate_mma_tiles(const MmaModel& model, std::int64_t m, std::int64_t n, std::int64_t k,
                            std::int64_t per_distribution, std::uint64_t seed);

}  // namespace roundscope::emu
