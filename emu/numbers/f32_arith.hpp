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

ROUNDSCOPE_HD inline float max(float a, float b) { return a > b ? a : b; }  // NaN-free callers

}  // namespace roundscope::emu::f32_arith
