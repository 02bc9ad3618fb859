#include "analysis/collapse_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/numbers/format_info.hpp"
#include "lib/parallel.hpp"

namespace roundscope::analysis {

double underflow_log(const emu::Format& p_format) { return -std::log(emu::format_info(p_format).min_subnormal / 2); }

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

namespace {

struct RowModel {
    bool measured = false;  // has a sink key and a score spread
    double sink_strength = 0, spread = 0, sink_mass = 0;
    bool has_keys = false;
    std::uint64_t rest_keys = 0;             // visible non-sink keys
    std::vector<double> predicted, counted;  // [order][scale]: normal model, held scores
    std::array<std::uint32_t, profile_bins> score_gaps{}, p_binades{};
};

// A value's bin of one unit, the last holding everything from profile_bins - 1 on.
std::size_t profile_bin(double x) {
    return static_cast<std::size_t>(std::min(x, static_cast<double>(profile_bins - 1)));
}

// The row's profile (HeadCollapseModel::score_gaps, p_binades) from its live scores; leaves each
// live key's exp(s - max) in `e` (scratch of n_kv) and returns their sum, in key order, which the
// sink's mass reads.
double add_profile(RowModel& r, const double* s, const std::vector<char>& live, std::uint64_t visible,
                   std::uint64_t k_sink, std::vector<double>& e) {
    double top = -std::numeric_limits<double>::infinity();
    for (std::uint64_t j = 0; j < visible; ++j)
        if (live[j]) top = std::max(top, s[j]);
    double total = 0;
    for (std::uint64_t j = 0; j < visible; ++j)
        if (live[j]) e[j] = std::exp(s[j] - top), total += e[j];
    for (std::uint64_t j = 0; j < visible; ++j) {
        if (!live[j]) continue;
        if (j >= k_sink) ++r.score_gaps[profile_bin(top - s[j])];
        const double p = e[j] / total;
        int exponent = 0;
        std::frexp(p, &exponent);  // p in [2^(exponent - 1), 2^exponent)
        ++r.p_binades[p == 0 ? profile_bins - 1 : profile_bin(std::max(0, -exponent))];
    }
    return total;
}

struct Moments {
    double mean = 0, sd = 0;
};

Moments moments(const double* s, std::uint64_t n) {
    Moments m;
    for (std::uint64_t j = 0; j < n; ++j) m.mean += s[j];
    m.mean /= static_cast<double>(n);
    double squares = 0;
    for (std::uint64_t j = 0; j < n; ++j) squares += (s[j] - m.mean) * (s[j] - m.mean);
    m.sd = std::sqrt(squares / static_cast<double>(n));
    return m;
}

// The fraction of a row's non-sink scores at or below `threshold` under the normal model.
double below(const Moments& m, double threshold) {
    if (m.sd > 0) return normal_cdf((threshold - m.mean) / m.sd);
    return m.mean <= threshold ? 1.0 : 0.0;
}

// Row i's model from its scores over the keys it sees (the mask's value added, masked keys left
// out), `s` and `exps` scratch of n_kv.
RowModel row_model(const double* qi, const std::vector<double>& k, std::uint64_t i, std::uint64_t d,
                   const CollapseModelOptions& o, std::vector<double>& s, std::vector<double>& exps,
                   std::vector<char>& live) {
    RowModel r;
    const std::uint64_t visible = emu::visible_keys(o.shape, i);
    std::vector<double> sink_scores, rest_scores;
    for (std::uint64_t j = 0; j < visible; ++j) {
        const double mask = emu::key_mask(o.shape, 0, i, j);
        live[j] = mask != -std::numeric_limits<double>::infinity();
        if (!live[j]) continue;
        double dot = 0;
        for (std::uint64_t c = 0; c < d; ++c) dot += qi[c] * k[j * d + c];
        s[j] = o.softmax_scale * dot;
        if (o.shape.softcap != 0) s[j] = o.shape.softcap * std::tanh(s[j] / o.shape.softcap);  // capped first
        s[j] += mask;
        (j < o.k_sink ? sink_scores : rest_scores).push_back(s[j]);
    }
    if (rest_scores.empty()) return r;
    r.has_keys = true, r.rest_keys = rest_scores.size();
    const double total = add_profile(r, s.data(), live, visible, o.k_sink, exps);
    const Moments rest = moments(rest_scores.data(), rest_scores.size());
    if (!sink_scores.empty() && rest.sd > 0) {
        r.measured = true, r.spread = rest.sd;
        r.sink_strength = moments(sink_scores.data(), sink_scores.size()).mean - rest.mean;
        double sink = 0;
        for (std::uint64_t j = 0; j < std::min(visible, o.k_sink); ++j)
            if (live[j]) sink += exps[j];
        r.sink_mass = sink / total;
    }
    const std::uint64_t tiles = (visible + o.block_n - 1) / o.block_n;
    const double threshold = underflow_log(*o.p_format);
    for (const emu::KvOrder order : o.orders) {
        std::vector<double> counts(o.scales.size(), 0.0), below_threshold(o.scales.size(), 0.0);
        double running = -std::numeric_limits<double>::infinity();
        for (std::uint64_t step = 0; step < tiles; ++step) {
            const std::uint64_t t = order == emu::KvOrder::forward ? step : tiles - 1 - step;
            const std::uint64_t begin = t * o.block_n, end = std::min(visible, begin + o.block_n);
            std::uint64_t rest_in_tile = 0;
            for (std::uint64_t j = begin; j < end; ++j) {
                if (!live[j]) continue;
                running = std::max(running, s[j]);
                rest_in_tile += j >= o.k_sink;
            }
            for (std::size_t x = 0; x < o.scales.size(); ++x) {
                const double limit = running - threshold - std::log(static_cast<double>(o.scales[x]));
                counts[x] += static_cast<double>(rest_in_tile) * below(rest, limit);
                for (std::uint64_t j = std::max(begin, o.k_sink); j < end; ++j)
                    below_threshold[x] += live[j] && s[j] <= limit;
            }
        }
        r.predicted.insert(r.predicted.end(), counts.begin(), counts.end());
        r.counted.insert(r.counted.end(), below_threshold.begin(), below_threshold.end());
    }
    return r;
}

}  // namespace

bool collapses_more(const CollapsingRow& a, const CollapsingRow& b) {
    if (a.counted != b.counted) return a.counted > b.counted;
    // then a.counted / a.keys > b.counted / b.keys, exactly (keys are far below 2^32)
    const unsigned __int128 left = static_cast<unsigned __int128>(a.counted) * b.keys,
                            right = static_cast<unsigned __int128>(b.counted) * a.keys;
    if (left != right) return left > right;
    return a.head != b.head ? a.head < b.head : a.position < b.position;
}

HeadCollapseModel collapse_model(const std::vector<double>& q, const std::vector<double>& k, std::uint64_t n_q,
                                 std::uint64_t n_kv, std::uint64_t d, const CollapseModelOptions& o) {
    std::vector<RowModel> rows(n_q);
    parallel_for(n_q, 16, o.threads, [&](std::size_t begin, std::size_t end) {
        std::vector<double> scores(n_kv), exps(n_kv);
        std::vector<char> live(n_kv);
        for (std::size_t i = begin; i < end; ++i) rows[i] = row_model(q.data() + i * d, k, i, d, o, scores, exps, live);
    });
    // summed in row order: the same bits on any thread count
    HeadCollapseModel m;
    m.predicted_underflow.assign(o.orders.size() * o.scales.size(), 0.0);
    m.counted_underflow.assign(m.predicted_underflow.size(), 0.0);
    m.score_gaps.assign(profile_bins, 0), m.p_binades.assign(profile_bins, 0);
    m.sink_mass_sums.assign(position_bins, 0.0), m.position_rows.assign(position_bins, 0);
    const std::uint64_t problem = emu::problem_rows(o.shape);
    m.problem_rows = problem;
    for (std::uint64_t i = 0; i < n_q; ++i) {
        const RowModel& r = rows[i];
        if (!r.has_keys) continue;
        const std::uint64_t position = emu::query_position(o.shape, i);
        if (r.measured) {
            const std::size_t bin =
                static_cast<std::size_t>(position * position_bins / std::max<std::uint64_t>(1, problem));
            m.sink_mass_sums[std::min(bin, position_bins - 1)] += r.sink_mass;
            ++m.position_rows[std::min(bin, position_bins - 1)];
        }
        if (!r.counted.empty() && r.counted[0] > 0) {
            const CollapsingRow row{0, position, r.rest_keys, static_cast<std::uint64_t>(r.counted[0]),
                                    r.measured ? r.sink_mass : std::numeric_limits<double>::quiet_NaN()};
            m.collapsing_rows.push_back(row);
            std::sort(m.collapsing_rows.begin(), m.collapsing_rows.end(), collapses_more);
            if (m.collapsing_rows.size() > collapsing_row_count) m.collapsing_rows.pop_back();
        }
        for (std::size_t b = 0; b < profile_bins; ++b)
            m.score_gaps[b] += r.score_gaps[b], m.p_binades[b] += r.p_binades[b];
        for (std::size_t x = 0; x < r.predicted.size(); ++x)
            m.predicted_underflow[x] += r.predicted[x], m.counted_underflow[x] += r.counted[x];
        if (!r.measured) continue;
        ++m.rows;
        m.sink_strength += r.sink_strength, m.score_spread += r.spread, m.sink_mass += r.sink_mass;
    }
    if (m.rows > 0) {
        const auto rows_measured = static_cast<double>(m.rows);
        m.sink_strength /= rows_measured, m.score_spread /= rows_measured, m.sink_mass /= rows_measured;
    }
    return m;
}

}  // namespace roundscope::analysis
