// A row's maximum may come out as either zero when the scores' maximum is one (f32_arith::max:
// the host's compare and select gives its second operand, the device's fmaxf either). This proves
// that no output of the forward pass reads which: every use of a maximum m (the row max, the raw
// max, the previous max of a rescale) is exp2's argument t - m, RN(s c - m) or m_old - m_new, or
// the LSE's m + log2 l, and for each, over every float32 other operand, the two zeros give the
// same bits or a zero, and exp2 of either zero is 1 under every exp2 the recipes use; log2 l is
// never -0 (log2 1 is +0), so m + log2 l is the same value.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "emu/attention/softmax/attention_steps.hpp"
#include "lib/bits.hpp"

using namespace roundscope;
using namespace roundscope::emu;
namespace a = emu::f32_arith;

namespace {

bool zero(float x) { return x == 0.0f; }

// Over all 2^32 x: how many inputs give results under the two zeros that differ other than as zeros.
template <class F>
std::uint64_t differing(F with_zero) {
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::atomic<std::uint64_t> total{0};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            std::uint64_t count = 0;
            for (std::uint64_t b = t; b < (std::uint64_t{1} << 32); b += threads) {
                const float x = float_from_bits(static_cast<std::uint32_t>(b));
                const float plus = with_zero(x, 0.0f), minus = with_zero(x, -0.0f);
                if (bits_of(plus) != bits_of(minus) && !(zero(plus) && zero(minus)) &&
                    !(plus != plus && minus != minus))
                    ++count;
            }
            total += count;
        });
    for (std::thread& t : pool) t.join();
    return total;
}

}  // namespace

TEST_CASE("exp2 of either zero is one, and log2 of one is +0", "[max][exhaustive]") {
    for (const Exp2Kind kind :
         {Exp2Kind::software, Exp2Kind::hardware_approx, Exp2Kind::cuda_exp2f, Exp2Kind::hardware_ftz}) {
        CHECK(bits_of(steps::exp2(0.0f, kind)) == 0x3F800000u);
        CHECK(bits_of(steps::exp2(-0.0f, kind)) == 0x3F800000u);
    }
    CHECK(bits_of(soft_log2(1.0f)) == 0u);
}

TEST_CASE("a maximum's zero sign reaches no output of the forward pass", "[max][exhaustive]") {
    // t - m and m_old - m_new: the maximum on either side
    CHECK(differing([](float x, float m) { return a::sub(x, m); }) == 0);
    CHECK(differing([](float x, float m) { return a::sub(m, x); }) == 0);
    // RN(s c - m) at the scales of D = 64 and 128 (exp2_arg=fma)
    for (const float scale : {0.125f, 0.088388346f}) {
        const float c = steps::scale_log2(scale);
        CHECK(differing([c](float s, float m) { return steps::exp2_argument(s, c, m, Exp2Arg::fma); }) == 0);
    }
    // m + log2 l: the same but where log2 l is -0, which it never is (above)
    CHECK(differing([](float y, float m) { return y == 0.0f && std::signbit(y) ? 1.0f : a::add(m, y); }) == 0);
}
