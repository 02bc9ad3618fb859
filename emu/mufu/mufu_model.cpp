#include "emu/mufu/mufu_model.hpp"

#include <bit>
#include <cmath>
#include <cstdio>

#include "emu/mufu/mufu_digest.hpp"
#include "emu/numbers/round.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/bits.hpp"

namespace roundscope::emu {
namespace {

constexpr std::uint32_t inf_bits = 0x7F800000u, sign_bit = 0x80000000u, fraction_mask = 0x7FFFFFu;

std::string hex_float(float v) {
    char s[32];
    std::snprintf(s, sizeof s, "%a", static_cast<double>(v));
    return s;
}

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

// v 2^-f rounded to float32 under r by emu's one rounding rule (exact for any int64 v). The
// format is a local constant and the rule flattened in, so the compiler specializes it for
// float32 (a third of a verification over 2^32 inputs went to the general routine).
__attribute__((flatten)) std::uint32_t to_float(std::int64_t v, int f, FixedRounding r) {
    constexpr Format target = f32;
    CastOptions o;
    o.mode = r == FixedRounding::nearest_even  ? RoundingMode::nearest_even
             : r == FixedRounding::toward_zero ? RoundingMode::toward_zero
             : r == FixedRounding::floor       ? RoundingMode::toward_negative
                                               : RoundingMode::toward_positive;
    if (v == 0) return 0;  // +0, as the sum of e and L gives it
    Unpacked x;
    x.cls = ValueClass::finite;
    x.negative = v < 0;
    x.m = v < 0 ? static_cast<std::uint64_t>(-v) : static_cast<std::uint64_t>(v);
    x.e = -f;
    return static_cast<std::uint32_t>(round_to_format(target, x, o));
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
    const bool positive_table = !model.table_positive.empty() && (xb & sign_bit) == 0;
    const std::vector<std::uint32_t>& table = positive_table ? model.table_positive : model.table;
    const std::int64_t r = std::int64_t{table[static_cast<std::size_t>(fixed & fraction_mask)]} + n * (1 << 23);
    if (r < (std::int64_t{1} << 23)) return 0;  // below 2^-126: flushed
    if (r >= std::int64_t{inf_bits}) return inf_bits;
    return static_cast<std::uint32_t>(r);
}

// The centred lg2 on a normal x = 2^e (1 + m 2^-23): e' + L~ in fixed point with 50 fraction
// bits (every L of the table is a multiple of 2^-49, checked by the fit) and the infinitesimal
// as one unit of the last place.
constexpr int centred_bits = mufu_lg2_centred_bits;
std::uint32_t lg2_centred(const MufuModel& model, std::int64_t e, std::uint32_t m) {
    const bool halved = m >= model.split;  // m' = x 2^-(e + 1) in [sqrt(1/2), 1)
    const std::int64_t e1 = e + (halved ? 1 : 0);
    const std::uint32_t lb = model.table[m];
    const bool one = m == 0;
    if (one && e1 == 0) return 0;  // log2 1 = +0
    const float lv = float_from_bits(one ? model.at_one : lb);
    // times 2^50 exactly (a power of two, and lv a float): libm's ldexp was a tenth of the time
    constexpr double scale = static_cast<double>(std::int64_t{1} << centred_bits);
    const auto l = static_cast<std::int64_t>(static_cast<double>(lv) * scale);
    std::int64_t sum = (e1 * (std::int64_t{1} << centred_bits) + l) * 2;
    if (model.beyond) sum += halved || (one && lv != 0.0f) ? -1 : 1;
    return to_float(sum, centred_bits + 1, model.rounding);
}

std::uint32_t lg2_ftz(const MufuModel& model, std::uint32_t xb) {
    if (is_nan(xb)) return nan_output(model, xb);
    if (is_zero_or_subnormal(xb)) return 0xFF800000u;
    if (xb & sign_bit) return nan_output(model, 0x7FC00000u);
    if (xb == inf_bits) return inf_bits;
    const std::int64_t e = static_cast<std::int64_t>(xb >> 23) - 127;
    if (model.split == 0) {
        const std::int64_t sum = e * (std::int64_t{1} << model.fraction_bits) + model.table[xb & fraction_mask];
        return to_float(sum, model.fraction_bits, model.rounding);
    }
    return lg2_centred(model, e, xb & fraction_mask);
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
        return std::string(table_positive.empty() ? "2^n T[f]" : "2^n T[f] (T+[f] for x >= 0)") +
               ", n.f = " + std::string(fixed_rounding_name(rounding)) + "(x 2^23)" +
               (variant == MufuVariant::ex2 ? ", halved and squared below -126" : "") + "; " + nan;
    const std::string subnormals = variant == MufuVariant::lg2 ? ", subnormals scaled by 2^24" : "";
    if (is_lg2(variant) && split != 0)
        return std::string(fixed_rounding_name(rounding)) + "(e' + L[m'])" + (beyond ? ", L~ beyond L" : "") +
               (at_one != 0 ? ", L~ = " + hex_float(float_from_bits(at_one)) + " at m' = 1, e' != 0" : "") +
               ", m' in [sqrt(1/2), sqrt(2)) split at mantissa " + std::to_string(split) + subnormals + "; " + nan;
    if (is_lg2(variant))
        return std::string(fixed_rounding_name(rounding)) + "(e + L[m]), L with " + std::to_string(fraction_bits) +
               " fraction bits" + subnormals + "; " + nan;
    return "2^-e R[m]; " + nan;
}

std::vector<std::uint64_t> mufu_model_digests(const MufuModel& model, int threads) {
    return with_model(model, [threads](const auto& unit) { return digests_of(unit, threads); });
}

}  // namespace roundscope::emu
