#pragma once
// The SIMD target Highway's runtime dispatch picks for every vector kernel (batch casts, Philox,
// the tensor-core GEMM, the truth's sums), and a way to hold it to a lower one: one machine can
// then measure, and test, every target it supports. Results never depend on the target
// (tests/lib/test_simd_targets.cpp); only speed does.
#include <string>
#include <string_view>
#include <vector>

namespace roundscope {

/// The target the kernels run on now, as Highway names it ("AVX3", "AVX2", "SSE4", "EMU128", ...).
std::string simd_target();

/// The targets this build carries that this CPU runs, best first; the last is the portable one.
std::vector<std::string> simd_targets();

/// Runs every kernel from now on at `name` (case-insensitive, one of simd_targets()) or below;
/// "best" lifts the limit. Throws Error naming the target and the choices otherwise. Not for use
/// while kernels run on other threads.
void limit_simd_target(std::string_view name);

}  // namespace roundscope
