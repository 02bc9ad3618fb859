#pragma once
// The wgmma layout probe: one warpgroup runs D = A B + C (64 x N, BF16 or E4M3 inputs, float32
// accumulators) over K as chained m64nNk16 (E4M3: m64nNk32) wgmmas, with A and B stored in shared
// memory in one of the layouts a fast kernel uses (K-major or MN-major, no swizzle or a 32-, 64-
// or 128-byte swizzle; E4M3 K-major only) or A from registers, and returns D. On the simulated GPU it checks the probe
// itself; on an sm_90 GPU (tests/gpu/test_gpu_mma.cpp, the kit's phase B) it confirms that the hardware reads each
// layout where gpu/primitives/wgmma_descriptor.hpp says, with the sm_90 model's bits.
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/primitives/wgmma_descriptor.hpp"
#include "lib/host_device.hpp"

namespace roundscope::gpu {

struct WgmmaLayoutCase {
    int n = 64;  // BF16: 64 or 128; E4M3: 64, 128, 160 or 224 (the generated widths besides 8)
    int k = 16;  // a multiple of 16 (E4M3: 32): chained wgmmas; with a K-major swizzled operand, K within a span
    Major a_major = Major::k, b_major = Major::k;
    bool a_in_registers = false;
    Swizzle swizzle = Swizzle::none;
    bool e4m3 = false;  // E4M3 inputs (else BF16)

    std::uint32_t element_bytes() const { return e4m3 ? 1 : 2; }
    int depth() const { return e4m3 ? 32 : 16; }  // K of one wgmma
};

/// Every BF16 case the probe runs (80): N 64 and 128, K 16 and 64, each swizzle, A K-major,
/// MN-major or from registers, B K-major or MN-major, less those it cannot store.
std::vector<WgmmaLayoutCase> wgmma_layout_cases();

/// Every E4M3 case (72): N 64, 128, 160 and 224 (an FP8 attention kernel's P V and S), K 32, 64
/// and 128 (S at D = 128: four k32 steps in one 128-byte span), each swizzle that holds K, A
/// K-major or from registers, B K-major.
std::vector<WgmmaLayoutCase> wgmma_e4m3_layout_cases();

/// "n128 k64 A:registers B:mn swizzle 128", for messages.
std::string layout_case_name(const WgmmaLayoutCase& c);

/// Why the case is not one the probe runs (empty: it is).
std::string layout_case_unsupported(const WgmmaLayoutCase& c);

/// The layout the probe stores an operand of K columns of `element_bytes` each in (at shared
/// `start`), for its step `step` (32 bytes of K: k16 of BF16, k32 of E4M3): K-major, core matrices
/// LBO 128 apart along K without swizzling, one span per row with one; MN-major, core matrices of 8 k x 16 bytes
/// without swizzling, else one span of MN per k and K of them per span (LBO), 8-k groups a swizzle period apart (SBO).
ROUNDSCOPE_HD constexpr WgmmaOperand probe_layout(Major major, std::uint32_t start, int k, Swizzle s, int step,
                                                  std::uint32_t element_bytes = 2) {
    const auto along_k = static_cast<std::uint32_t>(k), st = static_cast<std::uint32_t>(step);
    const std::uint32_t span = swizzle_span(s);
    if (major == Major::k) {
        if (s == Swizzle::none) return {start + 256u * st, 128, 128 * (along_k * element_bytes / 16), 0, s};
        return {start + 32u * st, 16, 8 * span, 0, s};
    }
    if (s == Swizzle::none) return {start + 256u * st, 128, 16 * along_k, 0, s};
    return {start + 16u * span * st, along_k * span, 8 * span, 0, s};
}

/// D (64 x N float32, row-major) = A (64 x K BF16 or E4M3 bits) B (N x K, each row one column of
/// B) + C.
/// Throws Error where no GPU can run it (wgmma needs sm_90a).
std::vector<float> run_wgmma_layout_probe(const WgmmaLayoutCase& c, const std::vector<std::uint32_t>& a,
                                          const std::vector<std::uint32_t>& b, const std::vector<float>& c_in);

}  // namespace roundscope::gpu
