#pragma once
// wgmma on the simulated GPU (gpu/primitives/wgmma.hpp's host side): wgmma.mma_async m64nNk16 with BF16
// inputs or m64nNk32 with E4M3 inputs (both operands K-major), and float32 accumulators, B from shared memory through a
// descriptor, A from shared memory through a descriptor or from registers. As on the GPU it is asynchronous: an issue
// snapshots its operands (and the accumulators it adds to) and poisons the accumulator
// registers (NaN) until the thread's wait_group completes its group, when D is written; a
// later wgmma on the same accumulators within the pipeline adds to the pending result, as
// chained wgmmas over K do. Thread t of a warpgroup (warp w = t / 32, lane l) holds D(16 w + l / 4
// + 8 (i / 2), 8 j + 2 (l % 4) + i % 2) in d[4 j + i] (the PTX ISA's accumulator fragment); with
// A from registers, its warp's 16 rows in mma.sync's A fragment (m16n8k16's, or m16n8k32's for E4M3); operands in
// shared memory K-major or MN-major (gpu/primitives/wgmma_descriptor.hpp). Each element is the emulator's sm_90 wgmma
// model over the 16 (32) products (emu/mma/mma_model.hpp), through the prepared GEMM (emu/mma/mma_gemm.hpp) that the
// emulator's tiles use. What the PTX ISA leaves undefined fails the block instead of passing by the host's timing (each
// rule stricter than the ISA only where a kernel of ours never goes):
// - a wgmma without a wgmma.fence since the thread's last wait_group (or the kernel's start);
// - accumulators the thread wrote while their wgmma was in flight (they hold the poison until
//   their last wgmma completes, and are checked for it then);
// - a shared operand changed between issue and completion (compared at wait_group), or released
//   by an mbarrier arrival before it (simt_sync.hpp: the TMA load that reuses it fails);
// - a wait_group with wgmmas issued but not committed, and a thread that ends with any in flight.
#include <cstdint>
#include <vector>

#include "gpu/host/simt_sync.hpp"
#include "gpu/primitives/wgmma_descriptor.hpp"

namespace roundscope::gpu::simt {

/// One wgmma by the calling thread: d holds n / 2 floats; a_regs null for A from shared memory
/// (desc_a, read as a_major says), else the thread's 4 A registers; B read as b_major says.
void wgmma_bf16(float* d, int n, std::uint64_t desc_a, const std::uint32_t* a_regs, std::uint64_t desc_b, bool scale_d,
                Major a_major = Major::k, Major b_major = Major::k);
/// The same for E4M3 inputs, k32: A by descriptor or from the thread's 4 registers of four E4M3
/// each, both operands K-major.
void wgmma_e4m3(float* d, int n, std::uint64_t desc_a, const std::uint32_t* a_regs, std::uint64_t desc_b, bool scale_d);
void wgmma_fence();
void wgmma_commit_group();
/// Completes the thread's oldest groups until at most `pending` remain: their D are written.
void wgmma_wait_group(int pending);
/// The shared memory the calling thread's wgmmas in flight read, with their groups, and how many
/// of its groups have completed (an mbarrier arrival's arguments).
std::vector<InFlightRead> wgmma_shared_reads();
std::uint64_t wgmma_completed_groups();
/// Error if the calling thread ends with wgmmas in flight (run_grid calls it after the kernel).
void wgmma_check_finished();

}  // namespace roundscope::gpu::simt
