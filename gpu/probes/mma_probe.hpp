#pragma once
// MMA probes: run one tensor-core instruction per tile on the local GPU and return D, so that
// `roundscope probe` can write golden vectors of the user's own hardware (format of
// tests/data/golden) and `roundscope mma --check` can hold the models against them.
#include <cstdint>
#include <string>
#include <vector>

#include "emu/numbers/format.hpp"
#include "gpu/primitives/device_arch.hpp"

namespace roundscope::gpu {

enum class ProbeInstruction : std::uint8_t {
    mma_sync,  // mma.sync m16n8k16 (16-bit inputs) or m16n8k32 (FP8): tiles of 16 x 8
    wgmma_rs,  // wgmma m64n8k16 / m64n8k32, A from registers (sm_90a): tiles of 64 x 8
    wgmma_ss,  // the same, A from shared memory
};

/// "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" and the like: the PTX that runs.
std::string probe_ptx(ProbeInstruction instruction, const emu::Format& input);
/// Rows of one tile (16 for mma.sync, 64 for wgmma); N is 8; K is 16 for 16-bit inputs, 32 for FP8.
int probe_rows(ProbeInstruction instruction);
int probe_depth(const emu::Format& input);

/// D = A*B + C for `tiles` tiles on the GPU (bf16, f16, e4m3 or e5m2 inputs; float32 C and
/// D), row-major bit patterns in the layout of emu::MmaTiles. Throws Error when the GPU cannot
/// run the instruction (FP8 mma.sync needs sm_89, wgmma sm_90a).
std::vector<std::uint32_t> run_mma_probe(ProbeInstruction instruction, const emu::Format& input,
                                         const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b,
                                         const std::vector<std::uint32_t>& c, std::int64_t tiles);

/// The tensor-core variants beyond mma.sync and wgmma m64n8 with float32 accumulators
/// (gpu/probes/mma_probe_variants.cu): tf32 inputs, float16 accumulators, and wgmma with scale-d = 0
/// (D = A B; C is not read, and the file records C = +0 for the model).
struct ProbeVariant {
    std::string name;                          // the file's stem: "wgmma_ss_tf32", "mma_f16_acc_f16", ...
    ProbeInstruction instruction{};            // mma_sync, wgmma_rs or wgmma_ss
    const emu::Format* input = nullptr;        // bf16, f16, e4m3, e5m2, or f32 (read as tf32)
    const emu::Format* accumulator = nullptr;  // f32 or f16
    bool scale_d_zero = false;
};

/// The variants a GPU of compute capability `cc` runs (sm_90: all of them).
std::vector<ProbeVariant> extra_probe_variants(int cc);
std::string probe_ptx(const ProbeVariant& v);
int probe_depth(const ProbeVariant& v);
/// D (bit patterns of v.accumulator) of `tiles` tiles; throws Error when the GPU cannot run it.
std::vector<std::uint32_t> run_mma_probe(const ProbeVariant& v, const std::vector<std::uint32_t>& a,
                                         const std::vector<std::uint32_t>& b, const std::vector<std::uint32_t>& c,
                                         std::int64_t tiles);

/// Digests of the GPU's float32 -> `to` conversion (bf16 and f16 round to nearest even; e4m3
/// and e5m2 through cvt.rn.satfinite) over all 2^32 inputs, in 256 chunks of 2^24: chunk j
/// holds the sum mod 2^64 of conversion_mix(x, bits) for x in it.
std::vector<std::uint64_t> conversion_digests(const emu::Format& to);

}  // namespace roundscope::gpu
