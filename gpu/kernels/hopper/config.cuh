#pragma once
// The Hopper forward kernel's fixed shape: its tiles, its threads and their registers, the K/V
// ring's depth, the shared-memory panels the 128-byte swizzle lays out, the named barriers, and
// the parameters a launch takes.
#include <cstdint>

#include "emu/attention/softmax/attention_steps.hpp"
#include "gpu/primitives/tma.hpp"

namespace roundscope::gpu::hopper {

inline constexpr int block_m = 128, block_n = 128;      // query rows and keys of a tile
inline constexpr int consumer_threads = 256;            // two warpgroups
inline constexpr int threads = consumer_threads + 128;  // and the producer warpgroup
// setmaxnreg's split of the 168 registers each of 384 threads starts with (65536 / 384, rounded
// down to a multiple of 8): 128 x 24 + 256 x 240 = 384 x 168
inline constexpr int producer_registers = 24, consumer_registers = 240;
inline constexpr std::uint32_t stages = 2;                              // the K/V ring's depth: tiles loaded ahead
inline constexpr int panel_cols = 64;                                   // a 128-byte swizzle span of BF16
inline constexpr std::uint32_t panel_bytes = block_n * panel_cols * 2;  // a 128-row panel: 16 KiB
inline constexpr std::uint32_t swizzle_period = 1024;                   // the 128-byte swizzle repeats every 8 rows

/// The named barriers (bar.sync ids) the kernel uses besides 0 (__syncthreads).
struct NamedBarrier {
    /// Consumer warpgroup w's epilogue: its 128 threads have staged O before one of them stores it.
    static constexpr unsigned epilogue(unsigned warpgroup) { return 1 + warpgroup; }
};

struct ForwardParams {
    TmaMap q_map, k_map, v_map, o_map;  // [heads][n][d] BF16: boxes 64 columns x 128 rows (O: 64 rows)
    float *lse, *lse2;                  // [heads][n_q]
    float* o_f32;                       // [heads][n_q][d]: O before its cast, or null
    std::uint64_t n_q, n_kv;
    bool causal, reverse;
    emu::steps::OnlineSoftmax softmax;  // its P format BF16, as O's (the host checks)
};

}  // namespace roundscope::gpu::hopper
