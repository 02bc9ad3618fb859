// tanh_rn (emu/attention/math/softcap.hpp), the double tanh rounded once to float32, is the correctly
// rounded float32 tanh on all 2^32 float32 inputs. For each input the double result d is at most
// 2 ulps of double from the exact value (glibc's bound for tanh on x86_64, its libm-test-ulps);
// where d lies more than 4 double ulps from every float32 rounding boundary, the exact value
// rounds as d does; the few inputs left are rounded by MPFR at 200 bits (a float32's tanh is
// never that close to a boundary) and must agree. tanh is odd: -x gives -tanh_rn(x) bit for bit.
#include <catch2/catch.hpp>

#include <mpfr.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "emu/attention/math/softcap.hpp"
#include "lib/parallel.hpp"

using namespace roundscope;

namespace {

float as_float(std::uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

std::uint32_t bits(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

// tanh(x) rounded to float32 by MPFR, correctly.
float mpfr_tanh_f32(float x) {
    mpfr_t t;
    mpfr_init2(t, 200);
    mpfr_set_flt(t, x, MPFR_RNDN);
    mpfr_tanh(t, t, MPFR_RNDN);
    const float r = mpfr_get_flt(t, MPFR_RNDN);
    mpfr_clear(t);
    return r;
}

}  // namespace

TEST_CASE("tanh_rn is the correctly rounded float32 tanh on every float32 input", "[softcap][exhaustive]") {
    std::atomic<std::uint64_t> by_mpfr{0}, wrong{0}, asymmetric{0};
    std::mutex first_mutex;
    std::vector<std::uint32_t> first_wrong;
    constexpr std::uint64_t positives = 0x7F800000u;  // +0 .. the largest finite, then +inf
    parallel_for(positives + 1, 1 << 16, 0, [&](std::size_t begin, std::size_t end) {
        std::uint64_t local_mpfr = 0, local_wrong = 0, local_asym = 0;
        for (std::size_t i = begin; i < end; ++i) {
            const float x = as_float(static_cast<std::uint32_t>(i));
            const float got = emu::tanh_rn(x);
            if (bits(emu::tanh_rn(-x)) != (bits(got) ^ 0x80000000u)) ++local_asym;
            if (std::isinf(x)) {
                local_wrong += got != 1.0f;
                continue;
            }
            const double d = std::tanh(static_cast<double>(x));
            const float below = std::nextafter(got, 0.0f), above = std::nextafter(got, 2.0f);
            const double lo = (static_cast<double>(below) + static_cast<double>(got)) / 2,
                         hi = (static_cast<double>(above) + static_cast<double>(got)) / 2;
            const double margin = 4 * (std::nextafter(d, 2.0) - d);
            if (d - margin > lo && d + margin < hi) continue;  // d and the exact value round alike
            ++local_mpfr;
            if (bits(mpfr_tanh_f32(x)) != bits(got)) {
                ++local_wrong;
                const std::lock_guard<std::mutex> lock(first_mutex);
                if (first_wrong.size() < 8) first_wrong.push_back(static_cast<std::uint32_t>(i));
            }
        }
        by_mpfr += local_mpfr, wrong += local_wrong, asymmetric += local_asym;
    });
    INFO("inputs decided by MPFR: " << by_mpfr.load());
    for (const std::uint32_t b : first_wrong) INFO("wrong at 0x" << std::hex << b);
    CHECK(wrong.load() == 0);
    CHECK(asymmetric.load() == 0);
    CHECK(by_mpfr.load() > 0);  // the check above decided some inputs by MPFR: it ran
}
