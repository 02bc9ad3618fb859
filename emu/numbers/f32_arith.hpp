#pragma once
// Float32 arithmetic with every rounding spelled out, the same bits on the CPU and in CUDA:
// each operation is one IEEE round-to-nearest-even operation, never fused unless it says fma.
// The host build compiles with -ffp-contract=off; device code calls the _rn intrinsics, which
// nvcc never contracts and which keep subnormals (the kernels are built without -ftz).
#include <cmath>

#include "lib/host_device.hpp"

namespace roundscope::emu::f32_arith {

ROUNDSCOPE_HD inline float add(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

ROUNDSCOPE_HD inline float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

ROUNDSCOPE_HD inline float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

ROUNDSCOPE_HD inline float div(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

/// a * b + c rounded once.
ROUNDSCOPE_HD inline float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
    return __fmaf_rn(a, b, c);
#else
    return std::fma(a, b, c);
#endif
}

/// The larger of a and b (NaN-free callers). Which zero max(-0, +0) gives is not specified:
/// the host's compare and select gives b, the device's fmaxf (one FMNMX instead of a compare and
/// a select) either; no output of attention reads a maximum's zero sign (docs/design.md, and
/// tests/emu/attention/test_max_zero_sign_exhaustive.cpp).
ROUNDSCOPE_HD inline float max(float a, float b) {
#if defined(__CUDA_ARCH__)
    return fmaxf(a, b);
#else
    return a > b ? a : b;
#endif
}

}  // namespace roundscope::emu::f32_arith
