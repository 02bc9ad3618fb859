#pragma once
// An MPFI interval that frees itself: the arithmetic of the reference ground truth. Every
// operation rounds outward, so the exact value always lies inside; when both ends round to the
// same double, that double is the correctly rounded result (Ziv's test, made rigorous).
#include <mpfi.h>

#include <optional>

namespace roundscope::analysis {

class Interval {
public:
    explicit Interval(mpfr_prec_t precision) {
        mpfi_init2(value_, precision);
        mpfi_set_si(value_, 0);
    }
    ~Interval() { mpfi_clear(value_); }
    Interval(Interval&& other) noexcept {
        mpfi_init2(value_, mpfi_get_prec(other.value_));
        mpfi_swap(value_, other.value_);
    }
    Interval(const Interval&) = delete;
    Interval& operator=(const Interval&) = delete;
    Interval& operator=(Interval&&) = delete;

    mpfi_ptr get() { return value_; }
    mpfi_srcptr get() const { return value_; }

    /// The double nearest to every point of the interval, if there is one such double.
    std::optional<double> rounded() const {
        mpfr_t end;
        mpfr_init2(end, mpfi_get_prec(value_));
        mpfi_get_left(end, value_);
        const double lo = mpfr_get_d(end, MPFR_RNDN);
        mpfi_get_right(end, value_);
        const double hi = mpfr_get_d(end, MPFR_RNDN);
        mpfr_clear(end);
        if (lo != hi || mpfi_nan_p(value_)) return std::nullopt;
        return lo == 0 ? 0.0 : lo;  // below half the least subnormal the sign is moot: +0
    }

private:
    mpfi_t value_;
};

}  // namespace roundscope::analysis
