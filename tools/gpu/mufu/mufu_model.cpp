#include "tools/gpu/mufu/mufu_model.hpp"

#include <array>
#include <bit>
#include <cmath>

#include "emu/numbers/round.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"
#include "tools/gpu/mufu/mufu_digest.hpp"

namespace roundscope::gpu {
namespace {

constexpr std::uint32_t inf_bits = 0x7F800000u, sign_bit = 0x80000000u, fraction_mask = 0x7FFFFFu;
constexpr std::size_t table_size = std::size_t{1} << 23;
constexpr std::array<FixedRounding, 4> roundings{FixedRounding::floor, FixedRounding::nearest_even,
                                                 FixedRounding::toward_zero, FixedRounding::ceiling};

bool is_nan(std::uint32_t x) { return (x & 0x7FFFFFFFu) > inf_bits; }
bool is_zero_or_subnormal(std::uint32_t x) { return (x & inf_bits) == 0; }
bool is_ex2(MufuVariant v) { return v == MufuVariant::ex2_ftz || v == MufuVariant::ex2; }
bool is_lg2(MufuVariant v) { return v == MufuVariant::lg2_ftz || v == MufuVariant::lg2; }

// Whether a magnitude q + rest / 2^k (0 <= rest < 2^k) of sign `negative` rounds away from q.
bool rounds_away(std::uint64_t q, std::uint64_t rest, int k, bool negative, FixedRounding r) {
    if (rest == 0) return false;
    switch (r) {
        case FixedRounding::floor:
            return negative;
        case FixedRounding::ceiling:
            return !negative;
        case FixedRounding::toward_zero:
            return false;
        case FixedRounding::nearest_even: {
            const std::uint64_t half = std::uint64_t{1} << (k - 1);
            return rest > half || (rest == half && (q & 1));
        }
    }
    return false;
}

// x 2^23 rounded to an integer under r, for a normal x of magnitude below 2^40; in integers
// (the libm calls of floor and ldexp cost more than the rest of the model).
std::int64_t fixed_point_23(std::uint32_t xb, FixedRounding r) {
    const std::uint64_t m = (xb & fraction_mask) | 0x800000u;  // x = +-m 2^(s - 23)
    const int s = static_cast<int>((xb >> 23) & 0xFF) - 127;
    const bool negative = (xb & sign_bit) != 0;
    std::uint64_t q = 0;
    if (s >= 0) {
        q = m << s;
    } else {
        const int k = std::min(-s, 40);
        q = m >> k;
        q += rounds_away(q, m & ((std::uint64_t{1} << k) - 1), k, negative, r) ? 1 : 0;
    }
    return negative ? -static_cast<std::int64_t>(q) : static_cast<std::int64_t>(q);
}

// v 2^-f rounded to float32 under r by emu's one rounding rule: v is below 2^53 in magnitude
// (e 2^F + L with |e| <= 127, F <= 24), so v 2^-f is exact in double.
std::uint32_t to_float(std::int64_t v, int f, FixedRounding r) {
    emu::CastOptions o;
    o.mode = r == FixedRounding::nearest_even  ? emu::RoundingMode::nearest_even
             : r == FixedRounding::toward_zero ? emu::RoundingMode::toward_zero
             : r == FixedRounding::floor       ? emu::RoundingMode::toward_negative
                                               : emu::RoundingMode::toward_positive;
    if (v == 0) return 0;  // +0, as the sum of e and L gives it
    return static_cast<std::uint32_t>(emu::cast_from_f64(std::ldexp(static_cast<double>(v), -f), emu::f32, o));
}

std::uint32_t nan_output(const MufuModel& model, std::uint32_t x) {
    return model.canonical_nan ? 0x7FFFFFFFu : x | 0x00400000u;
}

std::uint32_t ex2_ftz(const MufuModel& model, std::uint32_t xb) {
    if (is_nan(xb)) return nan_output(model, xb);
    if (is_zero_or_subnormal(xb)) return 0x3F800000u;
    const float x = float_from_bits(xb);
    if (x >= 256.0f) return inf_bits;
    if (x < -256.0f) return 0;
    const std::int64_t fixed = fixed_point_23(xb, model.rounding);
    const std::int64_t n = fixed >> 23;
    const std::int64_t r = std::int64_t{model.table[static_cast<std::size_t>(fixed & fraction_mask)]} + n * (1 << 23);
    if (r < (std::int64_t{1} << 23)) return 0;  // below 2^-126: flushed
    if (r >= std::int64_t{inf_bits}) return inf_bits;
    return static_cast<std::uint32_t>(r);
}

std::uint32_t lg2_ftz(const MufuModel& model, std::uint32_t xb) {
    if (is_nan(xb)) return nan_output(model, xb);
    if (is_zero_or_subnormal(xb)) return 0xFF800000u;
    if (xb & sign_bit) return nan_output(model, 0x7FC00000u);
    if (xb == inf_bits) return inf_bits;
    const std::int64_t e = static_cast<std::int64_t>(xb >> 23) - 127;
    const std::int64_t sum = e * (std::int64_t{1} << model.fraction_bits) + model.table[xb & fraction_mask];
    return to_float(sum, model.fraction_bits, model.rounding);
}

std::uint32_t rcp_ftz(const MufuModel& model, std::uint32_t xb) {
    const std::uint32_t sign = xb & sign_bit;
    if (is_nan(xb)) return nan_output(model, xb);
    if (is_zero_or_subnormal(xb)) return sign | inf_bits;
    if ((xb & 0x7FFFFFFFu) == inf_bits) return sign;
    const std::int64_t e = static_cast<std::int64_t>((xb >> 23) & 0xFF) - 127;
    const std::int64_t r = std::int64_t{model.table[xb & fraction_mask]} - e * (1 << 23);
    if (r < (std::int64_t{1} << 23)) return sign;  // below 2^-126: flushed
    if (r >= std::int64_t{inf_bits}) return sign | inf_bits;
    return sign | static_cast<std::uint32_t>(r);
}

std::uint32_t ex2(const MufuModel& model, std::uint32_t x) {  // the non-ftz guard
    const float f = float_from_bits(x);
    if (!(f < -126.0f)) return ex2_ftz(model, x);
    const float half = float_from_bits(ex2_ftz(model, bits_of(f * 0.5f)));
    return bits_of(half * half);
}

std::uint32_t lg2(const MufuModel& model, std::uint32_t x) {  // the non-ftz guard
    if (!is_zero_or_subnormal(x) || (x & 0x7FFFFFFFu) == 0) return lg2_ftz(model, x);
    if (x & sign_bit) return nan_output(model, 0x7FC00000u);
    return bits_of(float_from_bits(lg2_ftz(model, bits_of(float_from_bits(x) * 0x1p24f))) - 24.0f);
}

// Calls f with the model's function as a lambda, so that loops over 2^32 inputs inline it.
template <class F>
auto with_model(const MufuModel& m, const F& f) {
    switch (m.variant) {
        case MufuVariant::ex2_ftz:
            return f([&m](std::uint32_t x) { return ex2_ftz(m, x); });
        case MufuVariant::ex2:
            return f([&m](std::uint32_t x) { return ex2(m, x); });
        case MufuVariant::lg2_ftz:
            return f([&m](std::uint32_t x) { return lg2_ftz(m, x); });
        case MufuVariant::lg2:
            return f([&m](std::uint32_t x) { return lg2(m, x); });
        case MufuVariant::rcp_ftz:
            break;
    }
    return f([&m](std::uint32_t x) { return rcp_ftz(m, x); });
}

// How many of a window's outputs the model gets right.
std::size_t matches(const MufuModel& model, const MufuCapturedWindow& w) {
    std::size_t n = 0;
    for (std::size_t j = 0; j < w.outputs.size(); ++j)
        n += model(w.first + static_cast<std::uint32_t>(j)) == w.outputs[j] ? 1 : 0;
    return n;
}

const MufuCapturedWindow* window_at(const MufuCapture& c, std::uint32_t first) {
    for (const MufuCapturedWindow& w : c.windows)
        if (w.first == first && w.outputs.size() == table_size) return &w;
    return nullptr;
}

std::string window_name(const MufuCapture& c, const MufuCapturedWindow& w) {
    for (const MufuWindow& spec : mufu_windows(c.variant))
        if (spec.first == w.first) return std::string(spec.range);
    return "window at " + std::to_string(w.first);
}

// Whether the model reproduces the digests of a spread of chunks (both signs, every 11th
// exponent): what decides between roundings that every window leaves tied.
bool matches_sample_chunks(const MufuModel& m, const MufuCapture& c) {
    for (std::uint32_t sign = 0; sign < 2; ++sign)
        for (std::uint32_t e = 1; e < 255; e += 11) {
            const std::size_t chunk = sign << 15 | e << 7 | 0x40;
            std::uint64_t sum = 0;
            for (std::uint32_t i = 0; i < (1u << mufu_chunk_bits); ++i) {
                const auto x = static_cast<std::uint32_t>(chunk << mufu_chunk_bits) + i;
                sum += emu::conversion_mix(x, m(x));
            }
            if (sum != c.digests[chunk]) return false;
        }
    return true;
}

// Picks the rounding that reproduces every window (and, where several do, a spread of chunk
// digests); logs each candidate's score.
bool choose_rounding(MufuModel& m, const MufuCapture& c, MufuFit& fit) {
    std::vector<FixedRounding> fitting;
    for (const FixedRounding r : roundings) {
        m.rounding = r;
        std::string line = "  ";  // appended piece by piece: GCC 12 warns (-Wrestrict) on "  " + string
        line.append(fixed_rounding_name(r)).append(":");
        bool all = true;
        for (const MufuCapturedWindow& w : c.windows) {
            const std::size_t ok = matches(m, w);
            line.append(" ").append(window_name(c, w)).append(" ").append(std::to_string(ok));
            line.append("/").append(std::to_string(w.outputs.size()));
            all = all && ok == w.outputs.size();
        }
        fit.log.push_back(line);
        if (all) fitting.push_back(r);
    }
    if (fitting.empty()) return false;
    m.rounding = fitting.front();
    if (fitting.size() == 1 || c.digests.size() != mufu_chunks) return true;
    fit.log.push_back(
        "  " + std::to_string(fitting.size()) +
        " candidates reproduce every window; deciding by the digests of 46 chunks spread over the exponents:");
    for (const FixedRounding r : fitting) {
        m.rounding = r;
        const bool ok = matches_sample_chunks(m, c);
        fit.log.push_back(std::string("    ").append(fixed_rounding_name(r)).append(ok ? ": all match" : ": differs"));
        if (ok) return true;
    }
    m.rounding = fitting.front();
    return true;  // no candidate fits the sample: the full check reports the failing chunks
}

// ex2: T from (-2, -1], where x 2^23 is an integer: x = -1 - j 2^-23 is n = -2, f = 2^23 - j
// (n = -1, f = 0 at j = 0).
bool fit_ex2(MufuModel& m, const MufuCapture& c, MufuFit& fit) {
    const MufuCapturedWindow* w = window_at(c, 0xBF800000u);
    if (w == nullptr) return fit.log.push_back("ex2: the capture lacks the window (-2, -1]"), false;
    m.table.assign(table_size, 0);
    for (std::size_t j = 0; j < table_size; ++j) {
        const std::int64_t n = j == 0 ? -1 : -2;
        const std::size_t f = j == 0 ? 0 : table_size - j;
        const std::int64_t t = std::int64_t{w->outputs[j]} - n * (1 << 23);
        if (is_zero_or_subnormal(w->outputs[j]) || t >= std::int64_t{inf_bits})
            return fit.log.push_back("ex2: an output in (-2, -1] is not a normal number"), false;
        m.table[f] = static_cast<std::uint32_t>(t);
    }
    fit.log.push_back("ex2: T read from (-2, -1]; input quantisation Q(x 2^23), candidates:");
    return choose_rounding(m, c, fit);
}

// lg2: L * 2^F from [1, 2), F the fewest fraction bits that hold every output.
bool fit_lg2(MufuModel& m, const MufuCapture& c, MufuFit& fit) {
    const MufuCapturedWindow* w = window_at(c, 0x3F800000u);
    if (w == nullptr) return fit.log.push_back("lg2: the capture lacks the window [1, 2)"), false;
    int f = 0;
    for (const std::uint32_t out : w->outputs) {
        const float v = float_from_bits(out);
        if (!(v >= 0.0f && v < 1.0f)) return fit.log.push_back("lg2: an output on [1, 2) is outside [0, 1)"), false;
        if (v == 0.0f) continue;
        int e = 0;
        std::frexp(v, &e);  // v = s 2^e, s in [0.5, 1) with 24 bits: the lowest bit is 2^(e - 24)
        const int low = e - 24 + std::countr_zero((out & fraction_mask) | (1u << 23));
        f = std::max(f, -low);
    }
    if (f > 24) {
        fit.log.push_back("lg2: outputs on [1, 2) need " + std::to_string(f) +
                          " fraction bits; a table with more than 24 is not fully visible in one binade");
        return false;
    }
    m.fraction_bits = f;
    m.table.assign(table_size, 0);
    for (std::size_t j = 0; j < table_size; ++j)
        m.table[j] = static_cast<std::uint32_t>(std::ldexp(float_from_bits(w->outputs[j]), f));
    fit.log.push_back("lg2: L read from [1, 2) with " + std::to_string(f) +
                      " fraction bits; rounding of e + L, candidates:");
    return choose_rounding(m, c, fit);
}

bool fit_rcp(MufuModel& m, const MufuCapture& c, MufuFit& fit) {
    const MufuCapturedWindow* w = window_at(c, 0x3F800000u);
    if (w == nullptr) return fit.log.push_back("rcp: the capture lacks the window [1, 2)"), false;
    for (const std::uint32_t out : w->outputs)
        if (is_zero_or_subnormal(out) || out >= inf_bits)
            return fit.log.push_back("rcp: an output on [1, 2) is not a positive normal number"), false;
    m.table = w->outputs;
    fit.log.push_back("rcp: R read from [1, 2)");
    return true;
}

// The NaN rule: the one that reproduces the digest of a chunk of NaNs only (0x7F810000...).
void choose_nan(MufuModel& m, const MufuCapture& c, MufuFit& fit) {
    constexpr std::size_t nan_chunk = 0x7F81;
    for (const bool canonical : {true, false}) {
        m.canonical_nan = canonical;
        std::uint64_t sum = 0;
        for (std::uint32_t i = 0; i < (1u << mufu_chunk_bits); ++i) {
            const std::uint32_t x = static_cast<std::uint32_t>(nan_chunk << mufu_chunk_bits) + i;
            sum += emu::conversion_mix(x, m(x));
        }
        if (sum == c.digests[nan_chunk]) {
            fit.log.push_back(canonical ? "NaN: the canonical 0x7FFFFFFF" : "NaN: the input made quiet");
            return;
        }
    }
    m.canonical_nan = true;
    fit.log.push_back("NaN: neither rule reproduces the NaN chunks (kept the canonical NaN)");
}

}  // namespace

std::string_view fixed_rounding_name(FixedRounding r) {
    switch (r) {
        case FixedRounding::floor:
            return "floor";
        case FixedRounding::nearest_even:
            return "nearest-even";
        case FixedRounding::toward_zero:
            return "toward-zero";
        case FixedRounding::ceiling:
            return "ceiling";
    }
    return "";
}

std::uint32_t MufuModel::operator()(std::uint32_t x) const {
    return with_model(*this, [x](const auto& unit) { return unit(x); });
}

std::string MufuModel::describe() const {
    const std::string nan = canonical_nan ? "NaN -> 0x7FFFFFFF" : "NaN -> input made quiet";
    if (is_ex2(variant))
        return "2^n T[f], n.f = " + std::string(fixed_rounding_name(rounding)) + "(x 2^23)" +
               (variant == MufuVariant::ex2 ? ", halved and squared below -126" : "") + "; " + nan;
    if (is_lg2(variant))
        return std::string(fixed_rounding_name(rounding)) + "(e + L[m]), L with " + std::to_string(fraction_bits) +
               " fraction bits" + (variant == MufuVariant::lg2 ? ", subnormals scaled by 2^24" : "") + "; " + nan;
    return "2^-e R[m]; " + nan;
}

MufuFit fit_mufu_model(const MufuCapture& capture, int) {
    MufuFit fit;
    MufuModel m;
    m.variant = capture.variant;
    const bool ok = is_ex2(m.variant)   ? fit_ex2(m, capture, fit)
                    : is_lg2(m.variant) ? fit_lg2(m, capture, fit)
                                        : fit_rcp(m, capture, fit);
    if (!ok) {
        fit.log.push_back("no hypothesis reproduces every window");
        return fit;
    }
    if (capture.digests.size() == mufu_chunks) choose_nan(m, capture, fit);
    fit.model = std::move(m);
    return fit;
}

std::vector<std::size_t> failing_chunks(const MufuModel& model, const std::vector<std::uint64_t>& digests,
                                        int threads) {
    if (digests.size() != mufu_chunks) throw Error("MUFU check: expected " + std::to_string(mufu_chunks) + " digests");
    const std::vector<std::uint64_t> mine =
        with_model(model, [threads](const auto& unit) { return digests_of(unit, threads); });
    std::vector<std::size_t> out;
    for (std::size_t j = 0; j < mufu_chunks; ++j)
        if (mine[j] != digests[j]) out.push_back(j);
    return out;
}

}  // namespace roundscope::gpu
