#pragma once
// Checks MX block quantization (mx_quantize_block) against an independent reference: MPFR for
// log2(amax) and amax / max_elem, the element grid from the spec's decoding formula, nearest-even
// chosen by search over that grid. Random blocks of every kind the scale rules must handle: all
// zero, float32 subnormals, any float32, beyond float32, one binade, exact ties and powers of two
// at the top, amax exactly max_elem * 2^k, NaN and infinity.
#include <cstddef>
#include <string>
#include <vector>

#include "emu/block/block_format.hpp"
#include "emu/numbers/format.hpp"

namespace roundscope::test {

// The number of `blocks` random blocks whose scale or elements differ from the reference.
std::size_t mx_blocks_mismatching_mpfr(const emu::Format& f, emu::ScaleRule rule, std::size_t blocks);

// The same for every MX element format (e4m3, e5m2, e2m3, e3m2, e2m1, int8) under every scale
// rule: "FORMAT RULE: N of BLOCKS blocks differ" for each pair that mismatches (empty: none).
std::vector<std::string> mx_mismatches_every_format_and_rule(std::size_t blocks);

}  // namespace roundscope::test
