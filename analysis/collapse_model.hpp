#pragma once
// The P-collapse prediction from the scores a kernel actually sees: q and k as held in the
// recipe's input format, multiplied exactly. The closed form of arXiv:2606.06521,
// Phi(Delta + delta_k - ln 1024 - ln S), takes a nominal Delta; but an FP8 kernel rounds the sink
// key's features first (Delta sqrt(D) / 4 = 16.97 becomes 16 in E4M3 at D = 128, Delta 6 becomes
// 5.66), and a real head has no nominal Delta at all. So, per query row:
//   - mu, sigma: the mean and standard deviation of the row's visible non-sink scores (a mask's
//     value added, masked keys left out; the
//     score spread), modelled as normal;
//   - the running max m the kernel holds after each KV tile, in the recipe's order and tile
//     width, taken from the held scores themselves;
//   - each tile's non-sink keys are predicted to underflow with probability
//     Phi((m - mu - ln 1024 - ln S) / sigma): P S = exp(s - m) S <= 2^-10 casts to zero in E4M3
//     (ln 1024 is underflow_log(e4m3)).
// In forward order the sink's tile comes first and sets m for every later key; in reverse order
// only the keys sharing the sink's tile see it. Beside the normal model, the empirical
// prediction counts the held scores themselves against the same threshold (the row's own
// distribution, heavy tails included): what the scores imply, so that the measured fraction
// minus it is what the kernel's rounding adds. The effective Delta reported is the sink scores'
// mean above mu (in score units, as Delta is where the other scores are N(0, 1)): what the closed
// form should be given.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"

namespace roundscope::analysis {

/// -ln of the largest P S that the cast into `p_format` turns into zero: half the format's least
/// subnormal, a tie rounded to the even zero (ln 1024 = 6.93 for E4M3, the constant of
/// arXiv:2606.06521's closed form).
double underflow_log(const emu::Format& p_format);

/// The standard normal distribution function Phi.
double normal_cdf(double x);

struct CollapseModelOptions {
    const emu::Format* p_format = &emu::e4m3;  // what P S is cast to
    std::vector<emu::KvOrder> orders;
    std::vector<float> scales;    // the static P scales S
    std::uint64_t block_n = 128;  // the recipe's KV tile width Bc
    std::uint64_t k_sink = 4;     // the first k_sink keys are the sink
    double softmax_scale = 1;
    int threads = 0;
    // The head's shape (one head): which keys each row sees and what the mask adds to their
    // scores (emu::key_mask), at each row's position where the rows are a sample.
    emu::AttentionShape shape;
};

/// The bins of a head's profile (HeadCollapseModel::score_gaps, p_binades): 40 of one unit and
/// the rest.
inline constexpr std::size_t profile_bins = 41;

/// The query positions a head's sink mass is averaged over (HeadCollapseModel::sink_mass_sums):
/// bin b holds positions [b P / 16, (b + 1) P / 16) of a problem of P rows, rounded down.
inline constexpr std::size_t position_bins = 16;

/// How many rows a head names as collapsing (HeadCollapseModel::collapsing_rows).
inline constexpr std::size_t collapsing_row_count = 3;

/// A row whose non-sink keys the held scores put below the cast's threshold (the first order and
/// scale of CollapseModelOptions).
struct CollapsingRow {
    std::uint64_t head = 0, position = 0;  // position: the row's own index in the problem
    std::uint64_t keys = 0;                // its visible non-sink keys
    std::uint64_t counted = 0;             // of them, at or below m - ln 1024 - ln S
    double sink_mass = 0;                  // exact softmax's mass on its sink keys; NaN: not measured (no
                                           // sink key, or its other scores all equal)
};

/// Orders rows by the keys counted (most first), then by their share of the row's keys, then by
/// head and position.
bool collapses_more(const CollapsingRow& a, const CollapsingRow& b);

/// One head's model. Rows without a visible non-sink key add nothing; rows whose non-sink
/// scores are all equal predict with a step at mu.
struct HeadCollapseModel {
    double sink_strength = 0;                 // effective Delta: mean over rows of mean sink score - mu
    double score_spread = 0;                  // mean over rows of sigma, in score units
    double sink_mass = 0;                     // mean over rows of the exact softmax's mass on the sink keys
    std::uint64_t rows = 0;                   // rows with a sink key and two distinct non-sink scores (the means above)
    std::vector<double> predicted_underflow;  // expected non-sink P cast to zero, [order][scale]
    std::vector<double> counted_underflow;    // non-sink scores at or below m - ln 1024 - ln S, [order][scale]
    // The head's profile, over the visible keys of its rows with a non-sink key (profile_bins
    // each): how far each non-sink score lies below its row's maximum (bin i: [i, i + 1) nats,
    // the last: 40 or more), and each key's exact softmax probability by binade (bin i:
    // [2^-(i+1), 2^-i), P = 1 in bin 0, the last: below 2^-40, zero included).
    std::vector<std::uint64_t> score_gaps, p_binades;
    // Where in the sequence the sink takes its mass: per position bin (position_bins), the sum of
    // the measured rows' sink mass and their count. And the rows that collapse most
    // (collapsing_row_count at most, collapses_more first).
    std::vector<double> sink_mass_sums;
    std::vector<std::uint64_t> position_rows;
    std::uint64_t problem_rows = 0;  // P, the rows of the problem the positions are of
    std::vector<CollapsingRow> collapsing_rows;
};

/// q [n_q][d] and k [n_kv][d], one head, as held by the kernel (exact doubles).
HeadCollapseModel collapse_model(const std::vector<double>& q, const std::vector<double>& k, std::uint64_t n_q,
                                 std::uint64_t n_kv, std::uint64_t d, const CollapseModelOptions& options);

}  // namespace roundscope::analysis
