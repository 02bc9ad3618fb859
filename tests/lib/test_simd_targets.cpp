// Property: every SIMD target this CPU runs gives the same bits as the best one, for every
// vector kernel roundscope has: the batch casts (every format, each deterministic mode and both
// stochastic ones, saturation and flushing, from float32 and float64), the Philox words, the
// tensor-core GEMM of every instruction model, the flash-attention emulator forward and
// backward, and the ground truth's fast path. The portable target (SCALAR, or EMU128 in builds
// whose baseline has it) is the kernels with SIMD disabled. CPUs with AVX-512 add AVX3 to the list; the test covers
// whatever is present.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "analysis/truth/attention_truth.hpp"
#include "analysis/truth/double_double.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/batch/batch_cast.hpp"
#include "emu/mma/mma_gemm.hpp"
#include "emu/mma/mma_model.hpp"
#include "emu/numbers/round.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"
#include "lib/philox_batch.hpp"
#include "lib/simd_target.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

// Restores the best target when a check fails half-way.
struct BestTargetAfter {
    ~BestTargetAfter() { limit_simd_target("best"); }
};

template <class Real>
std::vector<Real> cast_inputs() {
    std::mt19937_64 rng(11);
    std::vector<Real> v;
    for (int i = 0; i < 40'000; ++i) {
        if constexpr (sizeof(Real) == 4) {
            v.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));  // every kind of float32
            v.push_back(std::ldexp(static_cast<float>(static_cast<std::int32_t>(rng() >> 40)), -int(rng() % 40)));
        } else {
            v.push_back(std::bit_cast<double>(rng()));
            v.push_back(std::ldexp(static_cast<double>(static_cast<std::int64_t>(rng()) >> 20), -int(rng() % 80) - 20));
        }
    }
    for (Real x : {Real(0), -Real(0), std::numeric_limits<Real>::infinity(), std::numeric_limits<Real>::quiet_NaN(),
                   std::numeric_limits<Real>::denorm_min(), std::numeric_limits<Real>::max()})
        v.push_back(x);
    return v;
}

// Every batch cast the kernels serve, as one vector of output bits.
std::vector<std::uint32_t> all_casts() {
    const std::vector<float> f = cast_inputs<float>();
    const std::vector<double> d = cast_inputs<double>();
    std::vector<std::uint32_t> all;
    for (const Format& to : all_formats) {
        if (to.bits > 32) continue;
        for (const char* mode : {"rne", "rna", "rtz", "up", "down", "odd", "sr", "sr:7"}) {
            for (int variant = 0; variant < 3; ++variant) {
                CastOptions o;
                parse_rounding_mode(mode, o);
                o.seed = 99;
                o.saturate = variant == 1;
                o.flush_input = o.flush_output = variant == 2;
                std::vector<std::uint32_t> out(f.size());
                cast_batch(std::span<const float>(f), to, o, std::span<std::uint32_t>(out), {5, 2});
                all.insert(all.end(), out.begin(), out.end());
                out.assign(d.size(), 0);
                cast_batch(std::span<const double>(d), to, o, std::span<std::uint32_t>(out), {5, 2});
                all.insert(all.end(), out.begin(), out.end());
            }
        }
    }
    return all;
}

std::vector<std::uint32_t> philox() {
    std::vector<std::uint32_t> w(10'007);
    philox_words(42, 3, w.size(), 1, w.data());
    return w;
}

// D = A B + C for every instruction model on random operand bits (NaN and Inf included).
std::vector<std::uint32_t> all_gemms() {
    std::mt19937_64 rng(3);
    std::vector<std::uint32_t> all;
    for (const MmaModel& m : all_mma_models()) {
        const std::int64_t rows = 33, cols = 17, depth = 3 * m.k + 5;
        auto random_bits = [&](const Format& f, std::int64_t count) {
            std::vector<std::uint32_t> v(static_cast<std::size_t>(count));
            for (auto& x : v) x = static_cast<std::uint32_t>(rng() & ((std::uint64_t{1} << f.bits) - 1));
            return v;
        };
        const std::vector<std::uint32_t> a = random_bits(m.a, rows * depth), b = random_bits(m.b, depth * cols),
                                         c = random_bits(m.accumulator, rows * cols);
        std::vector<std::uint32_t> out(static_cast<std::size_t>(rows * cols));
        mma_gemm(m, GemmOperands{a.data(), b.data(), c.data(), out.data(), 1, rows, cols, depth}, 2);
        all.insert(all.end(), out.begin(), out.end());
    }
    return all;
}

// Forward and backward of three recipes that between them use every attention path.
std::vector<std::uint32_t> all_flash() {
    std::vector<std::uint32_t> all;
    for (const char* name : {"fa2-bf16", "fa3-fp8", "mxfp4-v-fixed", "fa2-bf16-torch"}) {
        const AttentionRecipe r = find_recipe(name);
        const AttentionShape sh = attention_shape(2, 70, 90, 64, true);
        const AttentionOperands in = random_operands(sh, *r.target.input, 8);
        const ForwardResult f = flash_forward(r, sh, in, 2);
        const BackwardResult b = flash_backward(r, sh, in, f, 2);
        for (const auto* part : {&f.o, &b.dq, &b.dk, &b.dv}) all.insert(all.end(), part->begin(), part->end());
        for (const auto* part : {&f.lse, &b.delta}) {
            const std::vector<std::uint32_t> bits = float_bits(*part);
            all.insert(all.end(), bits.begin(), bits.end());
        }
    }
    return all;
}

std::vector<double> truth() {
    std::mt19937_64 rng(4);
    std::normal_distribution<double> g;
    auto tensor = [&](const char* name, std::uint64_t rows) {
        Tensor t = Tensor::zeros(name, DType::bf16, {rows, 64});
        for (std::uint64_t i = 0; i < rows * 64; ++i) t.set_bits_at(i, cast_from_f64(3 * g(rng), bf16, CastOptions{}));
        return t;
    };
    AttentionInputs in;
    in.q = tensor("q", 40), in.k = tensor("k", 56), in.v = tensor("v", 56), in.d_o = tensor("do", 40);
    in.n_q = 40, in.n_kv = 56, in.d = in.d_v = 64;
    analysis::TruthOptions o;
    o.backward = true;
    const analysis::AttentionTruth t = analysis::attention_truth(in, o);
    std::vector<double> all;
    for (const auto* part : {&t.o, &t.lse, &t.delta, &t.dq, &t.dk, &t.dv})
        all.insert(all.end(), part->begin(), part->end());
    return all;
}

// The index of the first element whose bits differ (or of the shorter end), -1 when none does: a
// failure names one element instead of printing millions.
template <class T>
long first_difference(const std::vector<T>& x, const std::vector<T>& y) {
    for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i)
        if (std::memcmp(&x[i], &y[i], sizeof(T)) != 0) return static_cast<long>(i);
    return x.size() == y.size() ? -1 : static_cast<long>(std::min(x.size(), y.size()));
}

}  // namespace

TEST_CASE("Every SIMD target gives the best target's bits, in every vector kernel", "[simd]") {
    BestTargetAfter restore;
    const std::vector<std::string> targets = simd_targets();
    REQUIRE(targets.size() >= 2);  // x86-64 always has SSE4-class targets below the best and EMU128
    CHECK((targets.back() == "SCALAR" || targets.back() == "EMU128"));  // the portable one: no SIMD
    CHECK(simd_target() == targets.front());
    const auto casts = all_casts();
    const auto words = philox();
    const auto gemms = all_gemms();
    const auto flash = all_flash();
    const auto exact = truth();
    for (std::size_t i = 1; i < targets.size(); ++i) {
        limit_simd_target(targets[i]);
        INFO("target " << targets[i]);
        REQUIRE(simd_target() == targets[i]);
        CHECK(first_difference(all_casts(), casts) == -1);
        CHECK(first_difference(philox(), words) == -1);
        CHECK(first_difference(all_gemms(), gemms) == -1);
        CHECK(first_difference(all_flash(), flash) == -1);
        CHECK(first_difference(truth(), exact) == -1);
    }
}

TEST_CASE("An unknown SIMD target is refused, naming it and the choices, and leaves the target as it was", "[simd]") {
    BestTargetAfter restore;
    const std::string best = simd_target();
    CHECK_THROWS_WITH(limit_simd_target("avx9"), Catch::Contains("'avx9'") && Catch::Contains(best));
    CHECK(simd_target() == best);
    const std::string portable = simd_targets().back();
    limit_simd_target(portable == "SCALAR" ? "scalar" : "emu128");
    CHECK(simd_target() == portable);
    CHECK_THROWS_AS(limit_simd_target(""), Error);
    CHECK(simd_target() == portable);
    limit_simd_target("BEST");
    CHECK(simd_target() == best);
}

TEST_CASE("The truth's exp on vectors equals the scalar exp bit for bit, on every target", "[simd]") {
    namespace dd = analysis::dd;
    BestTargetAfter restore;
    // Balls across the range the truth uses, ties of k = x * 1024 / ln2 (each rounding of k to
    // even taken both ways), lo up to half an ulp of hi, radii from 0 to 2^-40 relative.
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> span(-600, 700), unit(-1, 1);
    std::vector<double> hi, lo, r;
    for (int i = 0; i < 20'003; ++i) {
        double h = span(rng);
        if (i % 4 == 1) h = (std::floor(h * 1477.3197218702985) + 0.5) / 1477.3197218702985;
        if (i % 4 == 2) h = std::nextafter(h, 0.0), h = std::ldexp(std::round(std::ldexp(h, 20)), -20);
        hi.push_back(h);
        lo.push_back(unit(rng) * std::ldexp(std::fabs(h) + 1e-300, -54));
        r.push_back(i % 3 == 0 ? 0.0 : std::fabs(unit(rng)) * std::ldexp(std::fabs(h), -40 - int(rng() % 60)));
    }
    for (double h : {0.0, -0.0, -600.0, 700.0, -1e-300}) hi.push_back(h), lo.push_back(0), r.push_back(0);
    std::vector<double> want(3 * hi.size());
    for (std::size_t i = 0; i < hi.size(); ++i) {
        const dd::Ball e = dd::exp({{hi[i], lo[i]}, r[i]});
        want[3 * i] = e.v.hi, want[3 * i + 1] = e.v.lo, want[3 * i + 2] = e.r;
    }
    for (const std::string& target : simd_targets()) {
        limit_simd_target(target);
        for (const std::size_t n : {hi.size(), std::size_t{1}, std::size_t{3}, std::size_t{7}}) {
            std::vector<double> o_hi(n), o_lo(n), o_r(n);
            dd::exp_many(n, hi.data(), lo.data(), r.data(), o_hi.data(), o_lo.data(), o_r.data());
            std::size_t wrong = 0, first = n;
            for (std::size_t i = 0; i < n; ++i) {
                const bool same = std::memcmp(&o_hi[i], &want[3 * i], 8) == 0 &&
                                  std::memcmp(&o_lo[i], &want[3 * i + 1], 8) == 0 &&
                                  std::memcmp(&o_r[i], &want[3 * i + 2], 8) == 0;
                if (!same && wrong++ == 0) first = i;
            }
            INFO("target " << target << ", n " << n << ", first differing ball " << first);
            CHECK(wrong == 0);
        }
    }
}
