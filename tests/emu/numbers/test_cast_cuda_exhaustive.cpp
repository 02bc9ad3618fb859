// Property: for all 2^32 float32 inputs, round_to_format and the SIMD batch cast give the bits
// of NVIDIA's host-side conversions, which gave the same bits as the H100's conversion
// instructions on all 2^32 inputs (docs/golden-vectors.md). A hardware check without a GPU.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>

#include "emu/batch/batch_cast.hpp"
#include "emu/numbers/round.hpp"
#include "tests/emu/exhaustive.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

// The format is a template argument so that the compiler specializes the scalar routine for it,
// as it would for any caller with a fixed format: this keeps 2^32 scalar casts fast.
template <class Bits, const Format* To, class Cuda>
void check_against_cuda(const CastOptions& options, Cuda cuda) {
    test::Mismatches mismatches;
    test::check_all_float32<Bits>(
        *To, [&](std::uint32_t) { return options; },
        [&](float x, const CastOptions&, std::uint64_t) { return static_cast<std::uint64_t>(cuda(x)); },
        [](float x, const CastOptions& o, std::uint64_t) { return cast_from_f32(x, *To, o); }, mismatches);
    INFO(mismatches.report());
    REQUIRE(mismatches.count == 0);
}

CastOptions cuda_options(const Format& to, bool saturate, RoundingMode mode = RoundingMode::nearest_even) {
    CastOptions o = convention_options(Convention::cuda, to);
    o.saturate = saturate;
    o.mode = mode;
    return o;
}

}  // namespace

TEST_CASE("f32 -> bf16 (rne) equals __float2bfloat16_rn on all 2^32 inputs", "[exhaustive][cuda]") {
    check_against_cuda<std::uint16_t, &bf16>(
        cuda_options(bf16, false), [](float x) { return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(x)).x; });
}

TEST_CASE("f32 -> f16 (rne) equals __float2half_rn on all 2^32 inputs", "[exhaustive][cuda]") {
    check_against_cuda<std::uint16_t, &f16>(cuda_options(f16, false),
                                            [](float x) { return static_cast<__half_raw>(__float2half_rn(x)).x; });
}

TEST_CASE("f32 -> e4m3 (rne, satfinite and not) equals __nv_cvt_float_to_fp8 on all 2^32 inputs",
          "[exhaustive][cuda]") {
    for (const bool sat : {true, false}) {
        DYNAMIC_SECTION("saturate " << sat) {
            check_against_cuda<std::uint8_t, &e4m3>(cuda_options(e4m3, sat), [sat](float x) {
                return __nv_cvt_float_to_fp8(x, sat ? __NV_SATFINITE : __NV_NOSAT, __NV_E4M3);
            });
        }
    }
}

TEST_CASE("f32 -> e5m2 (rne, satfinite and not) equals __nv_cvt_float_to_fp8 on all 2^32 inputs",
          "[exhaustive][cuda]") {
    for (const bool sat : {true, false}) {
        DYNAMIC_SECTION("saturate " << sat) {
            check_against_cuda<std::uint8_t, &e5m2>(cuda_options(e5m2, sat), [sat](float x) {
                return __nv_cvt_float_to_fp8(x, sat ? __NV_SATFINITE : __NV_NOSAT, __NV_E5M2);
            });
        }
    }
}

// cuda_fp6.hpp / cuda_fp4.hpp convert with satfinite semantics, to nearest-even or toward zero.
TEST_CASE("f32 -> e2m3, e3m2 (rne, rtz) equal __nv_cvt_float_to_fp6 on all 2^32 inputs", "[exhaustive][cuda]") {
    for (const auto mode : {RoundingMode::nearest_even, RoundingMode::toward_zero}) {
        const cudaRoundMode cuda_mode = mode == RoundingMode::nearest_even ? cudaRoundNearest : cudaRoundZero;
        DYNAMIC_SECTION("e2m3 mode " << int(mode)) {
            check_against_cuda<std::uint8_t, &e2m3>(cuda_options(e2m3, true, mode), [cuda_mode](float x) {
                return __nv_cvt_float_to_fp6(x, __NV_E2M3, cuda_mode);
            });
        }
        DYNAMIC_SECTION("e3m2 mode " << int(mode)) {
            check_against_cuda<std::uint8_t, &e3m2>(cuda_options(e3m2, true, mode), [cuda_mode](float x) {
                return __nv_cvt_float_to_fp6(x, __NV_E3M2, cuda_mode);
            });
        }
    }
}

TEST_CASE("f32 -> e2m1 (rne, rtz) equals __nv_cvt_float_to_fp4 on all 2^32 inputs", "[exhaustive][cuda]") {
    for (const auto mode : {RoundingMode::nearest_even, RoundingMode::toward_zero}) {
        const cudaRoundMode cuda_mode = mode == RoundingMode::nearest_even ? cudaRoundNearest : cudaRoundZero;
        DYNAMIC_SECTION("mode " << int(mode)) {
            check_against_cuda<std::uint8_t, &e2m1>(cuda_options(e2m1, true, mode), [cuda_mode](float x) {
                return __nv_cvt_float_to_fp4(x, __NV_E2M1, cuda_mode);
            });
        }
    }
}
