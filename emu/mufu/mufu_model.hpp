#pragma once
// A model of a special-function unit: one structure per function whose free parts (a table
// over one binade, the input quantisation, the final rounding, the NaN output) are fitted to a
// capture of the hardware by tools/gpu/mufu (mufu_fitting.hpp) and checked there against every
// 2^16-input digest of all 2^32 inputs. The structures, in the order the fit tries them:
//
//   ex2, two's complement: 2^x = 2^n T[f] with n.f = Q(x 2^23) in fixed point (Q: floor,
//        nearest even, toward zero or ceiling), T read from (-2, -1].
//   ex2, sign-magnitude: the same with a second table T+ for x >= 0, read from [1, 2) (what
//        an H100 does: its T+ is not 2 T, and |x| is truncated).
//        Both: results below 2^-126 flushed; the non-ftz variant halves x below -126 and
//        squares the result (the guard ptxas emits).
//   lg2, one binade: log2 x = R(e + L[m]) for x = 2^e (1 + m 2^-23), L a fixed-point table with
//        F <= 24 fraction bits read off [1, 2), R (nearest even, toward zero, down, up) from
//        [0.5, 1) and [2, 4).
//   lg2, centred: x = 2^e' m' with m' in [sqrt(1/2), sqrt(2)) (the split read as the first
//        input of [1, 2) whose output reaches 0.5), L[m'] read where e' = 0 (the two halves of
//        [0.5, 2) around 1), and log2 x = R(e' + L~) where L~ is L itself or lies an
//        infinitesimal beyond it (below L for m' < 1, above it for m' >= 1: a table value that
//        was itself truncated from a longer one). At m' = 1 the table holds 0, the output at
//        x = 1 is +0, but with e' != 0 L~ is a small positive value (read off x = 0.5 as 1 +
//        lg2(0.5), and taken an infinitesimal below it). What an H100 does.
//        Both: non-ftz subnormals scaled by 2^24 and 24 subtracted.
//   rcp: 1/x = 2^-e R[m], R read from [1, 2); subnormal results flushed.
// Subnormal inputs of ftz variants are zeros (PTX ISA). The NaN output is the canonical
// 0x7FFFFFFF or the input made quiet, whichever the NaN chunks' digests say.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "emu/mufu/mufu_variant.hpp"

namespace roundscope::emu {

enum class FixedRounding : std::uint8_t { floor, nearest_even, toward_zero, ceiling };

struct MufuModel {
    MufuVariant variant{};
    std::vector<std::uint32_t> table;               // 2^23 entries: ex2 and rcp output bits at n = 0; lg2 L * 2^F,
                                                    // or (centred) the float32 bits of L[m']
    std::vector<std::uint32_t> table_positive;      // ex2, sign-magnitude: T+ (empty: two's complement)
    FixedRounding rounding = FixedRounding::floor;  // ex2: the input quantisation; lg2: the sum's
    int fraction_bits = 0;                          // lg2, one binade: F
    std::uint32_t split = 0;                        // lg2, centred: the first mantissa halved (0: one binade)
    bool beyond = false;                            // lg2, centred: L~ lies beyond L
    std::uint32_t at_one = 0;                       // lg2, centred: float32 bits of L~ at m' = 1 when e' != 0
    bool canonical_nan = true;                      // NaN gives 0x7FFFFFFF, else the input made quiet

    std::uint32_t operator()(std::uint32_t x) const;
    std::string describe() const;
};

/// The model's chunk digests over all 2^32 inputs (emu/mufu/mufu_digest.hpp), on `threads`
/// threads (0: all): what a capture's digests are compared with.
std::vector<std::uint64_t> mufu_model_digests(const MufuModel& model, int threads = 0);

std::string_view fixed_rounding_name(FixedRounding r);

/// The centred lg2 keeps its sum in fixed point with this many fraction bits (and one more for
/// the infinitesimal); a fit accepts only tables whose L are multiples of 2^-(bits - 1).
inline constexpr int mufu_lg2_centred_bits = 50;

}  // namespace roundscope::emu
