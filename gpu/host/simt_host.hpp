#pragma once
// The simulated GPU of the host build (ROUNDSCOPE_SIMT_HOST): a kernel launch runs every block
// of the grid as a set of host threads, one per CUDA thread, so that the kernel source runs
// unchanged. Within a block, sync_threads() is a real barrier and shared_memory() one buffer
// per block; mma.sync is a warp-collective step (gpu/host/warp_mma.hpp) that gathers the 32
// lanes' registers. Races between threads are therefore real races: ThreadSanitizer sees a
// missing barrier as the GPU would suffer it.
#include <array>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <source_location>
#include <string>

#include "gpu/host/simt_sync.hpp"

namespace roundscope::gpu {

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// CUDA's built-in variables, per simulated thread.
inline thread_local dim3 threadIdx{0, 0, 0};
inline thread_local dim3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim{1, 1, 1};
inline thread_local dim3 gridDim{1, 1, 1};

namespace simt {

/// What the threads of one block share.
struct Block {
    explicit Block(unsigned threads, std::size_t shared_bytes);
    unsigned threads;
    BlockSync sync;     // __syncthreads (named barrier 0), named barriers, mbarriers
    std::byte* shared;  // 1024-byte aligned (a 128-byte swizzle's period), shared_bytes long
    std::string arch;   // the tensor-core model the block's mma.sync executes ("sm90", ...)
    struct Warp;
    Warp* warps;  // blockDim / 32 of them
    std::size_t shared_bytes;

    ~Block();
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;

private:
    std::byte* shared_storage_;
};

/// The block the calling simulated thread belongs to.
Block& current_block();

/// Runs `body` as a kernel over `grid` x `block` simulated threads with `shared_bytes` of
/// dynamic shared memory per block; returns when every thread has finished. Blocks run a few
/// at a time, each thread on its own host thread. A block that fails (simt_sync.hpp: a
/// deadlock, a barrier misused) ends its threads; run_grid then throws Error with its report.
void run_grid(dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& body);

/// A warp-collective exchange (gpu/primitives/warp.hpp's shuffles): every thread of the calling thread's
/// warp hands in `value` and gets lane `source`'s.
std::uint32_t warp_exchange(std::uint32_t value, int source);

/// A warp-collective vote: bit l set where lane l's predicate is true.
std::uint32_t warp_ballot(bool predicate);

/// A warp-collective gather: every lane hands in `value` and gets all 32 lanes' values.
std::array<std::uint32_t, 32> warp_gather(std::uint32_t value);

/// The offset of `p` in the calling thread's block's shared memory; Error if it lies outside.
std::uint32_t shared_offset(const void* p);

/// The architecture whose tensor-core model the simulated mma.sync uses (default "sm90").
void set_simulated_architecture(std::string arch);
const std::string& simulated_architecture();

}  // namespace simt

namespace simt {
/// The calling simulated thread's index in its block (x fastest).
inline unsigned linear_thread() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
}  // namespace simt

/// __syncthreads(): bar.sync 0 with every thread of the block.
inline void sync_threads(std::source_location site = std::source_location::current()) {
    simt::Block& b = simt::current_block();
    b.sync.named_barrier(simt::linear_thread(), 0, b.threads, true, site);
}

template <class T>
T* shared_memory() {
    return reinterpret_cast<T*>(simt::current_block().shared);
}

}  // namespace roundscope::gpu
