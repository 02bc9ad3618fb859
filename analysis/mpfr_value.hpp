#pragma once
// One mpfr_t that frees itself: the MPFR value of roundscope's exact computations.
#include <mpfr.h>

namespace roundscope::analysis {

class MpfrValue {
public:
    /// A zero of `precision` bits.
    explicit MpfrValue(mpfr_prec_t precision) {
        mpfr_init2(value_, precision);
        mpfr_set_zero(value_, 1);
    }
    ~MpfrValue() { mpfr_clear(value_); }
    MpfrValue(const MpfrValue&) = delete;
    MpfrValue& operator=(const MpfrValue&) = delete;
    mpfr_ptr get() { return value_; }

private:
    mpfr_t value_;
};

}  // namespace roundscope::analysis
