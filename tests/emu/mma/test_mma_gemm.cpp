// The vector GEMM driver against the scalar engine, for every instruction model, on random
// bit patterns (NaN, Inf and subnormals included) and on random finite values of wide range;
// shapes whose N and K are not multiples of the vector length or the instruction's k; and the
// same bits on one thread and on two.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "emu/mma/mma_gemm.hpp"
#include "emu/numbers/round.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

struct RandomGemm {
    std::vector<std::uint32_t> a, b, c;
    GemmOperands operands(std::uint32_t* d, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k) const {
        return {a.data(), b.data(), c.data(), d, batch, m, n, k};
    }
};

// Random patterns of format f: any bits with probability `any_bits`, else a finite value whose
// exponent is spread over the whole range of f (so alignments differ by up to the full range).
std::uint32_t random_element(std::mt19937_64& rng, const Format& f, int dropped, double any_bits) {
    const std::uint64_t mask = f.bits == 32 ? 0xFFFFFFFFu : (std::uint64_t{1} << f.bits) - 1;
    std::uint64_t bits = rng() & mask;
    if (std::uniform_real_distribution<double>(0, 1)(rng) >= any_bits) {
        while (unpack(f, bits).cls == ValueClass::nan || unpack(f, bits).cls == ValueClass::inf) bits = rng() & mask;
    }
    if (std::uniform_int_distribution<int>(0, 15)(rng) == 0) bits &= sign_mask(f);  // some zeros
    return static_cast<std::uint32_t>(bits) & ~((std::uint32_t{1} << dropped) - 1);
}

RandomGemm random_gemm(const MmaModel& m, std::int64_t batch, std::int64_t rows, std::int64_t n, std::int64_t k,
                       double any_bits, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    RandomGemm g;
    for (std::int64_t i = 0; i < batch * rows * k; ++i)
        g.a.push_back(random_element(rng, m.a, m.dropped_input_bits, any_bits));
    for (std::int64_t i = 0; i < batch * k * n; ++i)
        g.b.push_back(random_element(rng, m.b, m.dropped_input_bits, any_bits));
    for (std::int64_t i = 0; i < batch * rows * n; ++i) g.c.push_back(random_element(rng, m.accumulator, 0, any_bits));
    return g;
}

}  // namespace

TEST_CASE("The vector GEMM equals the scalar engine for every model", "[mma][gemm]") {
    struct Shape {
        std::int64_t batch, m, n, k;
    };
    for (const MmaModel& model : all_mma_models()) {
        for (const Shape s : {Shape{3, 16, 8, 0}, Shape{1, 9, 37, 0}, Shape{2, 5, 64, 3}}) {
            const std::int64_t k = s.k == 0 ? 2 * model.k : model.k + s.k;  // whole and partial instructions
            for (const double any_bits : {0.0, 0.02}) {
                INFO(mma_model_name(model)
                     << " batch " << s.batch << " m " << s.m << " n " << s.n << " k " << k << " specials " << any_bits);
                const RandomGemm g =
                    random_gemm(model, s.batch, s.m, s.n, k, any_bits, 7 + static_cast<std::uint64_t>(k));
                std::vector<std::uint32_t> want(g.c.size()), fast(g.c.size()), fast_one_thread(g.c.size());
                mma_gemm_reference(model, g.operands(want.data(), s.batch, s.m, s.n, k), 1);
                mma_gemm(model, g.operands(fast.data(), s.batch, s.m, s.n, k), 2);
                mma_gemm(model, g.operands(fast_one_thread.data(), s.batch, s.m, s.n, k), 1);
                std::int64_t differ = 0;
                for (std::size_t i = 0; i < want.size(); ++i) differ += want[i] != fast[i];
                CHECK(differ == 0);
                CHECK(fast == fast_one_thread);
            }
        }
    }
}

TEST_CASE("The vector GEMM equals the scalar engine on a larger product", "[mma][gemm]") {
    const MmaModel& model = *find_mma_model("sm90", "mma.sync", bf16, bf16, f32);
    const RandomGemm g = random_gemm(model, 1, 64, 200, 136, 0.0, 99);
    std::vector<std::uint32_t> want(g.c.size()), fast(g.c.size());
    mma_gemm_reference(model, g.operands(want.data(), 1, 64, 200, 136), 0);
    mma_gemm(model, g.operands(fast.data(), 1, 64, 200, 136), 0);
    CHECK(want == fast);
}

// Block sums in float32's subnormal range and past 2^128 are rare among random values: here
// every column of B sits in one band of magnitudes (tiny, ordinary, huge), interleaved so that
// one vector of columns mixes them, against rows of A that are small (products finer than
// float32's subnormal quantum, which the truncation must clear) or large (sums past 2^128).
TEST_CASE("The vector GEMM equals the scalar engine where block sums are subnormal or overflow", "[mma][gemm]") {
    const std::int64_t m = 8, n = 48, k = 64;
    std::mt19937_64 rng(5);
    auto value = [&rng](int low, int high) {
        const double significand = 1 + std::uniform_real_distribution<double>(0, 1)(rng);
        const int e = std::uniform_int_distribution<int>(low, high)(rng);
        return static_cast<float>((rng() & 1 ? -1 : 1) * std::ldexp(significand, e));
    };
    std::int64_t subnormal_sums = 0, infinite_sums = 0;  // in float32 outputs: the bands do their job
    for (const MmaModel& model : all_mma_models()) {
        auto bits = [&](const Format& f, float x) { return static_cast<std::uint32_t>(cast_from_f32(x, f, {})); };
        RandomGemm g;
        for (std::int64_t i = 0; i < m * k; ++i) g.a.push_back(bits(model.a, i / k % 2 ? value(2, 4) : value(-12, -8)));
        for (std::int64_t t = 0; t < k; ++t) {
            for (std::int64_t j = 0; j < n; ++j) {
                const int band = static_cast<int>((j * 7 + j / 5) % 3);  // no period of a vector length
                g.b.push_back(bits(model.b, band == 0   ? value(-128, -118)
                                            : band == 1 ? value(-3, 3)
                                                        : value(124, 127)));
            }
        }
        for (std::int64_t i = 0; i < m * n; ++i)
            g.c.push_back(rng() % 4 == 0 ? bits(model.accumulator, value(-149, -127)) : 0);
        INFO(mma_model_name(model));
        std::vector<std::uint32_t> want(g.c.size()), fast(g.c.size());
        mma_gemm_reference(model, g.operands(want.data(), 1, m, n, k), 1);
        mma_gemm(model, g.operands(fast.data(), 1, m, n, k), 1);
        std::int64_t differ = 0;
        for (std::size_t i = 0; i < want.size(); ++i) differ += want[i] != fast[i];
        CHECK(differ == 0);
        if (model.accumulator == f32) {
            for (const std::uint32_t d : want) {
                subnormal_sums += (d & 0x7F800000u) == 0 && (d & 0x7FFFFFu) != 0;
                infinite_sums += (d & 0x7FFFFFFFu) == 0x7F800000u;
            }
        }
    }
    CHECK(subnormal_sums > 100);
    CHECK(infinite_sums > 100);
}
