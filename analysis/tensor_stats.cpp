#include "analysis/tensor_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "analysis/mpfr_value.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "emu/numbers/representable.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/parallel.hpp"
#include "lib/prefetch.hpp"

namespace roundscope::analysis {
namespace {

// ---- Classification shared by both paths ---------------------------------------------------

struct Value {
    emu::ValueClass cls;
    bool subnormal;
    double x;
};

// Values of dtype t: floats keep their class; integers and bool are finite. The subnormal
// threshold is found once per tensor, not per element.
class Classifier {
public:
    explicit Classifier(DType t) {
        if (!is_floating(t)) return;
        const emu::Format& f = emu::format_of(t);
        if (f.encoding != emu::Encoding::int8) smallest_normal_ = std::ldexp(1.0, emu::emin(f));
    }
    Value operator()(double x) const {
        if (std::isnan(x)) return {emu::ValueClass::nan, false, x};
        if (std::isinf(x)) return {emu::ValueClass::inf, false, x};
        const bool subnormal = x != 0 && std::fabs(x) < smallest_normal_;
        return {x == 0 ? emu::ValueClass::zero : emu::ValueClass::finite, subnormal, x};
    }

private:
    double smallest_normal_ = 0;  // 0: no subnormals (integers, bool, MXINT8)
};

// The largest finite value of each representability target, decoded once.
const std::array<double, representability_targets.size()>& target_maxima() {
    static const auto maxima = [] {
        std::array<double, representability_targets.size()> m{};
        for (std::size_t k = 0; k < m.size(); ++k) {
            m[k] = emu::decode(*representability_targets[k], emu::max_finite_bits(*representability_targets[k]));
        }
        return m;
    }();
    return maxima;
}

// Counts, extremes and representability: exact integer work, the same in both paths.
struct Tally {
    std::uint64_t count = 0, finite = 0, nan = 0, inf = 0, zeros = 0, subnormals = 0;
    double min = std::numeric_limits<double>::infinity(), max = -std::numeric_limits<double>::infinity();
    std::array<std::uint64_t, representability_targets.size()> exact{};

    void add(const Value& v, std::uint64_t n) {
        count += n;
        switch (v.cls) {
            case emu::ValueClass::nan:
                nan += n;
                return;
            case emu::ValueClass::inf:
                inf += n;
                return;
            case emu::ValueClass::zero:
                zeros += n;
                break;
            case emu::ValueClass::finite:
                break;
        }
        finite += n;
        subnormals += v.subnormal ? n : 0;
        min = std::min(min, v.x);
        max = std::max(max, v.x);
        const auto& maxima = target_maxima();
        for (std::size_t k = 0; k < exact.size(); ++k)
            exact[k] += emu::is_representable(v.x, *representability_targets[k], maxima[k]) ? n : 0;
    }
    void merge(const Tally& o) {
        count += o.count, finite += o.finite, nan += o.nan, inf += o.inf, zeros += o.zeros, subnormals += o.subnormals;
        min = std::min(min, o.min);
        max = std::max(max, o.max);
        for (std::size_t k = 0; k < exact.size(); ++k) exact[k] += o.exact[k];
    }
    TensorStats stats() const {
        TensorStats s{count, finite, nan, inf, zeros, subnormals, {}, {}, {}, {}, {}};
        if (finite == 0) return s;
        s.min = min == 0 ? 0.0 : min;  // -0 and +0 are the same minimum
        s.max = max == 0 ? 0.0 : max;
        for (std::size_t k = 0; k < exact.size(); ++k)
            s.exact_fraction[k] = static_cast<double>(exact[k]) / static_cast<double>(finite);
        return s;
    }
};

// ---- 8- and 16-bit elements: histogram, then exact sums ------------------------------------

std::vector<std::uint64_t> pattern_histogram(const Tensor& t, int threads) {
    const int unit = info(t.dtype()).storage_bytes;
    const std::size_t patterns = std::size_t{1} << (8 * unit);
    std::vector<std::uint64_t> total(patterns, 0);
    std::mutex total_mutex;
    const std::byte* data = t.bytes().data();
    constexpr std::size_t grain = std::size_t{1} << 22;
    const std::size_t ahead = grain * static_cast<std::size_t>(resolve_threads(threads));
    parallel_for(t.size(), grain, threads, [&](std::size_t begin, std::size_t end) {
        // Start the disk reads of the chunk taken after the ones running now: on a cold file
        // they overlap the counting.
        const std::size_t next = begin + ahead;
        if (next < t.size()) prefetch_pages(t.bytes().subspan(next * unit, std::min(grain, t.size() - next) * unit));
        // Two interleaved tables: runs of one value (zeros) would otherwise serialize on one counter.
        std::vector<std::uint32_t> h(2 * patterns, 0);
        if (unit == 1) {
            const auto* p = reinterpret_cast<const std::uint8_t*>(data);
            std::size_t i = begin;
            for (; i + 1 < end; i += 2) ++h[p[i]], ++h[patterns + p[i + 1]];
            for (; i < end; ++i) ++h[p[i]];
        } else {
            const auto* p = reinterpret_cast<const unsigned char*>(data);
            std::size_t i = begin;
            auto at = [&](std::size_t k) { return static_cast<std::size_t>(p[2 * k] | (p[2 * k + 1] << 8)); };
            for (; i + 1 < end; i += 2) ++h[at(i)], ++h[patterns + at(i + 1)];
            for (; i < end; ++i) ++h[at(i)];
        }
        std::lock_guard<std::mutex> lock(total_mutex);
        for (std::size_t k = 0; k < patterns; ++k) total[k] += h[k] + h[patterns + k];
    });
    return total;
}

double pattern_value(DType t, std::uint64_t bits) {
    switch (info(t).kind) {
        case DTypeKind::boolean:
            return bits != 0 ? 1.0 : 0.0;
        case DTypeKind::unsigned_integer:
            return static_cast<double>(bits);
        case DTypeKind::signed_integer:
            return info(t).storage_bytes == 1 ? static_cast<std::int8_t>(bits) : static_cast<std::int16_t>(bits);
        case DTypeKind::floating:
            return emu::decode(emu::format_of(t), bits);
    }
    return 0;
}

TensorStats histogram_stats(const Tensor& t, int threads) {
    const std::vector<std::uint64_t> histogram = pattern_histogram(t, threads);
    // Every value here is m * 2^e with |m| < 2^16 and -150 < e < 130, and counts are below 2^63:
    // 2048 bits hold sum(c * x) and sum(c * x^2) exactly.
    constexpr mpfr_prec_t exact_bits = 2048;
    MpfrValue sum(exact_bits), sum_squares(exact_bits), term(exact_bits);
    const Classifier classify(t.dtype());
    Tally tally;
    for (std::size_t bits = 0; bits < histogram.size(); ++bits) {
        const std::uint64_t c = histogram[bits];
        if (c == 0) continue;
        const Value v = classify(pattern_value(t.dtype(), bits));
        tally.add(v, c);
        if (v.cls != emu::ValueClass::finite) continue;
        mpfr_set_d(term.get(), v.x, MPFR_RNDN);
        mpfr_mul_ui(term.get(), term.get(), c, MPFR_RNDN);
        mpfr_add(sum.get(), sum.get(), term.get(), MPFR_RNDN);
        mpfr_mul_d(term.get(), term.get(), v.x, MPFR_RNDN);
        mpfr_add(sum_squares.get(), sum_squares.get(), term.get(), MPFR_RNDN);
    }
    TensorStats s = tally.stats();
    if (tally.finite == 0) return s;
    // mean = sum / n, rounded once; var = (n * sum_squares - sum^2) / n^2, exact up to the division.
    MpfrValue mean(53), n(exact_bits), variance(exact_bits), square(exact_bits), deviation(53);
    mpfr_set_ui(n.get(), tally.finite, MPFR_RNDN);
    mpfr_div(mean.get(), sum.get(), n.get(), MPFR_RNDN);
    mpfr_mul(variance.get(), sum_squares.get(), n.get(), MPFR_RNDN);
    mpfr_mul(square.get(), sum.get(), sum.get(), MPFR_RNDN);
    mpfr_sub(variance.get(), variance.get(), square.get(), MPFR_RNDN);
    mpfr_div(variance.get(), variance.get(), n.get(), MPFR_RNDN);
    mpfr_div(variance.get(), variance.get(), n.get(), MPFR_RNDN);
    mpfr_sqrt(deviation.get(), variance.get(), MPFR_RNDN);
    s.mean = mpfr_get_d(mean.get(), MPFR_RNDN);
    s.std = mpfr_get_d(deviation.get(), MPFR_RNDN);
    return s;
}

// ---- 32- and 64-bit elements: compensated sums in fixed chunks -----------------------------

struct Neumaier {
    double sum = 0, compensation = 0;
    void add(double x) {
        const double t = sum + x;
        compensation += std::fabs(sum) >= std::fabs(x) ? (sum - t) + x : (x - t) + sum;
        sum = t;
    }
    void add(const Neumaier& o) {
        add(o.sum);
        compensation += o.compensation;
    }
    double value() const { return sum + compensation; }
};

struct ChunkSums {
    Tally tally;
    Neumaier values;                    // sum of x, for the mean
    Neumaier shifted, shifted_squares;  // sums of (x - shift) and (x - shift)^2, for the variance
};

TensorStats streaming_stats(const Tensor& t, int threads) {
    constexpr std::size_t chunk = std::size_t{1} << 16;
    // Summing x - shift, with shift a value of the tensor, keeps the variance free of
    // cancellation when the mean is large against the spread.
    double shift = 0;
    {
        std::vector<double> first(std::min<std::uint64_t>(t.size(), chunk));
        for (std::uint64_t at = 0; at < t.size(); at += first.size()) {
            const std::size_t n = std::min<std::uint64_t>(first.size(), t.size() - at);
            emu::decode_elements<double>(t, at, std::span<double>(first).first(n));
            const auto it = std::find_if(first.begin(), first.begin() + n, [](double x) { return std::isfinite(x); });
            if (it != first.begin() + n) {
                shift = *it;
                break;
            }
        }
    }
    std::vector<ChunkSums> chunks((t.size() + chunk - 1) / chunk);
    const Classifier classify(t.dtype());
    parallel_for(t.size(), chunk, threads, [&](std::size_t begin, std::size_t end) {
        std::vector<double> x(end - begin);
        emu::decode_elements<double>(t, begin, x);
        ChunkSums& c = chunks[begin / chunk];
        for (double v : x) {
            const Value value = classify(v);
            c.tally.add(value, 1);
            if (value.cls == emu::ValueClass::nan || value.cls == emu::ValueClass::inf) continue;
            const double d = v - shift;
            c.values.add(v);
            c.shifted.add(d);
            c.shifted_squares.add(d * d);
        }
    });
    ChunkSums all;
    for (const ChunkSums& c : chunks) {
        all.tally.merge(c.tally);
        all.values.add(c.values);
        all.shifted.add(c.shifted);
        all.shifted_squares.add(c.shifted_squares);
    }
    TensorStats s = all.tally.stats();
    if (all.tally.finite == 0) return s;
    const double n = static_cast<double>(all.tally.finite);
    const double d_mean = all.shifted.value() / n;
    s.mean = all.values.value() / n;
    s.std = std::sqrt(std::max(0.0, all.shifted_squares.value() / n - d_mean * d_mean));
    return s;
}

}  // namespace

TensorStats tensor_stats(const Tensor& t, int threads) {
    if (info(t.dtype()).storage_bytes <= 2) return histogram_stats(t, threads);
    return streaming_stats(t, threads);
}

}  // namespace roundscope::analysis
