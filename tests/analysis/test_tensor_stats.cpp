#include <catch2/catch.hpp>

#include <mpfr.h>

#include <cmath>
#include <cstring>

#include "analysis/tensor_stats.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "emu/numbers/representable.hpp"
#include "tests/lib/tensor_samples.hpp"

using namespace roundscope;
using analysis::tensor_stats;

namespace {

struct Reference {
    std::uint64_t finite = 0, nan = 0, inf = 0, zeros = 0, subnormals = 0;
    double min = INFINITY, max = -INFINITY, mean = 0, std = 0;
};

// Element by element, with MPFR sums wide enough to be exact: the reference for both paths.
Reference reference(const Tensor& t) {
    const auto x = emu::decode_tensor<double>(t, 1);
    Reference r;
    mpfr_t sum, sq, term, mean, var;
    mpfr_inits2(4096, sum, sq, term, var, static_cast<mpfr_ptr>(nullptr));
    mpfr_init2(mean, 53);
    mpfr_set_zero(sum, 1);
    mpfr_set_zero(sq, 1);
    const double tiny = is_floating(t.dtype()) ? std::ldexp(1.0, emu::emin(emu::format_of(t.dtype()))) : 0;
    for (double v : x) {
        if (std::isnan(v)) {
            ++r.nan;
            continue;
        }
        if (std::isinf(v)) {
            ++r.inf;
            continue;
        }
        ++r.finite;
        r.zeros += v == 0;
        r.subnormals += v != 0 && std::fabs(v) < tiny;
        r.min = std::min(r.min, v);
        r.max = std::max(r.max, v);
        mpfr_add_d(sum, sum, v, MPFR_RNDN);
        mpfr_set_d(term, v, MPFR_RNDN);
        mpfr_mul_d(term, term, v, MPFR_RNDN);
        mpfr_add(sq, sq, term, MPFR_RNDN);
    }
    mpfr_div_ui(mean, sum, r.finite, MPFR_RNDN);
    r.mean = mpfr_get_d(mean, MPFR_RNDN);
    mpfr_div_ui(term, sum, r.finite, MPFR_RNDN);
    mpfr_mul(term, term, term, MPFR_RNDN);
    mpfr_div_ui(var, sq, r.finite, MPFR_RNDN);
    mpfr_sub(var, var, term, MPFR_RNDN);
    mpfr_sqrt(var, var, MPFR_RNDN);
    r.std = mpfr_get_d(var, MPFR_RNDN);
    mpfr_clears(sum, sq, term, mean, var, static_cast<mpfr_ptr>(nullptr));
    return r;
}

bool same_bits(const analysis::TensorStats& a, const analysis::TensorStats& b) {
    auto eq = [](const std::optional<double>& x, const std::optional<double>& y) {
        return x.has_value() == y.has_value() && (!x || std::memcmp(&*x, &*y, sizeof(double)) == 0);
    };
    bool exact = true;
    for (std::size_t k = 0; k < a.exact_fraction.size(); ++k)
        exact = exact && eq(a.exact_fraction[k], b.exact_fraction[k]);
    return a.count == b.count && a.nan == b.nan && a.inf == b.inf && a.zeros == b.zeros &&
           a.subnormals == b.subnormals && eq(a.min, b.min) && eq(a.max, b.max) && eq(a.mean, b.mean) &&
           eq(a.std, b.std) && exact;
}

// The exact parts, the same for both paths.
void check_counts_and_extremes(const analysis::TensorStats& s, const Reference& r) {
    CHECK(s.nan == r.nan);
    CHECK(s.inf == r.inf);
    CHECK(s.zeros == r.zeros);
    CHECK(s.subnormals == r.subnormals);
    CHECK(*s.min == r.min);
    CHECK(*s.max == r.max);
}

}  // namespace

TEST_CASE("tensor_stats of 8/16-bit tensors: exact counts and extremes, correctly rounded mean, std within an ulp",
          "[tensor_stats]") {
    for (DType d :
         {DType::bf16, DType::f16, DType::e4m3, DType::e5m2, DType::e2m1, DType::e8m0, DType::i16, DType::u8}) {
        const Tensor t = test::random_tensor("x", d, {3, 50001}, 5);
        const analysis::TensorStats s = tensor_stats(t, 2);
        const Reference r = reference(t);
        INFO(name(d));
        CHECK(s.count == t.size());
        CHECK(s.finite == r.finite);
        check_counts_and_extremes(s, r);
        CHECK(*s.mean == r.mean);
        CHECK(std::fabs(*s.std - r.std) <= std::ldexp(std::fabs(r.std), -52));
        CHECK(same_bits(s, tensor_stats(t, 1)));
    }
}

TEST_CASE("tensor_stats of 32/64-bit tensors: exact counts, compensated moments, same bits on any thread count",
          "[tensor_stats]") {
    for (DType d : {DType::f32, DType::f64, DType::i32}) {
        Tensor t = test::random_tensor("x", d, {200003}, 8);
        if (d == DType::f32)  // moderate values around a large mean: the shifted sums matter
            for (std::uint64_t i = 0; i < t.size(); ++i)
                t.set_bits_at(i, std::bit_cast<std::uint32_t>(1000.0f + static_cast<float>(i % 1000) / 64.0f));
        if (d == DType::f64)
            for (std::uint64_t i = 0; i < t.size(); i += 1000)
                t.set_bits_at(i, std::bit_cast<std::uint64_t>(std::nan("")));
        const analysis::TensorStats s = tensor_stats(t, 2);
        const Reference r = reference(t);
        INFO(name(d));
        check_counts_and_extremes(s, r);
        if (d != DType::f64) {  // random f64 bit patterns span 2^+-1023: their mean is dominated by one value
            CHECK(std::fabs(*s.mean - r.mean) <= 4e-16 * std::fabs(r.mean) + 1e-300);
            CHECK(std::fabs(*s.std - r.std) <= 1e-12 * r.std);
        }
        CHECK(same_bits(s, tensor_stats(t, 1)));
    }
}

TEST_CASE("tensor_stats counts NaN, Inf, zeros and subnormals and leaves moments empty without finite values",
          "[tensor_stats]") {
    Tensor t = Tensor::zeros("x", DType::bf16, {6});
    const std::uint64_t patterns[] = {0x7FC0, 0xFF80, 0x0000, 0x8000, 0x0001, 0x3F80};  // NaN -Inf +0 -0 subnormal 1
    for (int i = 0; i < 6; ++i) t.set_bits_at(i, patterns[i]);
    const auto s = tensor_stats(t);
    CHECK((s.nan == 1 && s.inf == 1 && s.zeros == 2 && s.subnormals == 1 && s.finite == 4));
    CHECK(*s.max == 1.0);
    CHECK(*s.min == 0.0);
    CHECK(*s.exact_fraction[1] == 0.75);  // e4m3 holds the zeros and 1, not 2^-133
    Tensor nans = Tensor::zeros("n", DType::f32, {3});
    for (int i = 0; i < 3; ++i) nans.set_bits_at(i, 0x7FC00000);
    const auto n = tensor_stats(nans);
    CHECK((n.nan == 3 && !n.min && !n.mean && !n.std && !n.exact_fraction[0]));
}
