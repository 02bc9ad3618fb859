#include "tools/gpu/mufu/mufu_fitting.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstdio>

#include "emu/batch/conversion_digest.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"

namespace roundscope::gpu {
namespace {

constexpr std::uint32_t inf_bits = 0x7F800000u, fraction_mask = 0x7FFFFFu;
constexpr std::size_t table_size = std::size_t{1} << 23;
constexpr int centred_bits = emu::mufu_lg2_centred_bits;
constexpr std::array<FixedRounding, 4> roundings{FixedRounding::floor, FixedRounding::nearest_even,
                                                 FixedRounding::toward_zero, FixedRounding::ceiling};

std::string hex_float(float v) {
    char s[32];
    std::snprintf(s, sizeof s, "%a", static_cast<double>(v));
    return s;
}

bool is_zero_or_subnormal(std::uint32_t x) { return (x & inf_bits) == 0; }
bool is_ex2(MufuVariant v) { return v == MufuVariant::ex2_ftz || v == MufuVariant::ex2; }
bool is_lg2(MufuVariant v) { return v == MufuVariant::lg2_ftz || v == MufuVariant::lg2; }

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
// (n = -1, f = 0 at j = 0); for the sign-magnitude hypothesis T+ from [1, 2) (n = 1, f = j).
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
    fit.log.push_back("ex2, two's complement: T read from (-2, -1]; input quantisation Q(x 2^23), candidates:");
    if (choose_rounding(m, c, fit)) return true;
    const MufuCapturedWindow* p = window_at(c, 0x3F800000u);
    if (p == nullptr) return fit.log.push_back("ex2: the capture lacks the window [1, 2)"), false;
    m.table_positive.assign(table_size, 0);
    for (std::size_t j = 0; j < table_size; ++j) {
        if (is_zero_or_subnormal(p->outputs[j]) || p->outputs[j] >= inf_bits)
            return fit.log.push_back("ex2: an output in [1, 2) is not a normal number"), false;
        m.table_positive[j] = p->outputs[j] - (1u << 23);
    }
    fit.log.push_back("ex2, sign-magnitude: T read from (-2, -1], T+ from [1, 2); input quantisation, candidates:");
    return choose_rounding(m, c, fit);
}

// lg2, centred: the split is the first input of [1, 2) whose output reaches 0.5; L[m] is the
// output at e' = 0, on [1, 2) below the split and on [0.5, 1) from it.
bool fit_lg2_centred(MufuModel& m, const MufuCapture& c, MufuFit& fit, const MufuCapturedWindow& one_two) {
    const MufuCapturedWindow* half = window_at(c, 0x3F000000u);
    if (half == nullptr) return fit.log.push_back("lg2, centred: the capture lacks the window [0.5, 1)"), false;
    std::uint32_t split = 0;
    while (split < table_size && !(float_from_bits(one_two.outputs[split]) >= 0.5f)) ++split;
    if (split == 0 || split == table_size)
        return fit.log.push_back("lg2, centred: no output on [1, 2) reaches 0.5 after the first"), false;
    m.split = split;
    m.fraction_bits = 0;
    m.table.assign(table_size, 0);
    for (std::uint32_t j = 0; j < table_size; ++j) {
        const std::uint32_t out = j < split ? one_two.outputs[j] : half->outputs[j];
        const float l = float_from_bits(out);
        const double scaled = std::ldexp(static_cast<double>(l), centred_bits - 1);
        if (!(std::fabs(l) <= 0.5f) || scaled != std::floor(scaled))
            return fit.log.push_back("lg2, centred: an output at e' = 0 is beyond 0.5 or finer than 2^-49"), false;
        m.table[j] = out;
    }
    // L~ at m' = 1 with e' = -1: 1 + lg2(0.5), exact in float (and a multiple of 2^-24).
    const float at_one = 1.0f + float_from_bits(half->outputs[0]);
    if (!(at_one >= 0.0f && at_one < 0x1p-20f))
        return fit.log.push_back("lg2, centred: lg2(0.5) is not within 2^-20 of -1"), false;
    m.at_one = bits_of(at_one);
    fit.log.push_back("lg2, centred: split at mantissa " + std::to_string(split) +
                      " (m' from sqrt(1/2) to sqrt(2)); L read where e' = 0; L~ at m' = 1 and e' != 0 from " +
                      "lg2(0.5): " + hex_float(at_one));
    for (const bool beyond : {false, true}) {
        m.beyond = beyond;
        fit.log.push_back(beyond ? " L~ beyond L; rounding of e' + L~, candidates:"
                                 : " L~ = L; rounding of e' + L, candidates:");
        if (choose_rounding(m, c, fit)) return true;
    }
    return false;
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
        fit.log.push_back("lg2, one binade: outputs on [1, 2) need " + std::to_string(f) +
                          " fraction bits; a table with more than 24 is not fully visible in one binade");
        return fit_lg2_centred(m, c, fit, *w);
    }
    m.fraction_bits = f;
    m.table.assign(table_size, 0);
    for (std::size_t j = 0; j < table_size; ++j)
        m.table[j] = static_cast<std::uint32_t>(std::ldexp(float_from_bits(w->outputs[j]), f));
    fit.log.push_back("lg2, one binade: L read from [1, 2) with " + std::to_string(f) +
                      " fraction bits; rounding of e + L, candidates:");
    if (choose_rounding(m, c, fit)) return true;
    return fit_lg2_centred(m, c, fit, *w);
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
    const std::vector<std::uint64_t> mine = emu::mufu_model_digests(model, threads);
    std::vector<std::size_t> out;
    for (std::size_t j = 0; j < mufu_chunks; ++j)
        if (mine[j] != digests[j]) out.push_back(j);
    return out;
}

}  // namespace roundscope::gpu
