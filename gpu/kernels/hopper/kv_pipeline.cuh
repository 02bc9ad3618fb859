#pragma once
// The K/V ring between the producer and the consumers: `stages` slots in shared memory, the
// ring's n-th tile in slot n % stages. Each operand (K, V) of a slot has a full barrier (the
// producer's arrival announcing the tile's bytes, its phase completed as the copies land) and an
// empty barrier (every consumer thread's arrival once its wgmma has read the tile). K and V have
// barriers of their own so that S can start while V is in flight.
//
// The producer acquires a slot (waits until the tile the ring's depth before it was released),
// then commits it (announces the bytes and gets the barrier its copies complete); a consumer
// waits for a slot, then releases it. Every wait names the kernel's line that called it, so a
// deadlock on the simulated GPU points at the kernel, not at this file.
#include <cstdint>

#include "gpu/kernels/hopper/config.cuh"
#include "gpu/primitives/sync.hpp"

namespace roundscope::gpu::hopper {

/// A tile's place in the ring: its slot, and the parity of the phase its barriers are in for it
/// (the n-th tile: n / stages % 2). Advanced tile by tile without a division.
struct RingSlot {
    std::uint32_t stage = 0, parity = 0;
    ROUNDSCOPE_DEVICE RingSlot next() const {
        return stage + 1 == stages ? RingSlot{0, parity ^ 1u} : RingSlot{stage + 1, parity};
    }
};

/// The operand a barrier of a slot guards.
enum class KvOperand : int { k = 0, v = 1 };

/// The ring's barriers, in shared memory.
struct KvBarriers {
    std::uint64_t full[2][stages], empty[2][stages];
};

class KvPipeline {
public:
    ROUNDSCOPE_DEVICE explicit KvPipeline(KvBarriers& bar) : bar_(bar) {}

    /// By one thread, before the barrier that publishes the block's shared memory: the full
    /// barriers take the producer's one arrival, the empty ones every consumer thread's.
    ROUNDSCOPE_DEVICE void init(unsigned consumers) {
        for (std::uint32_t s = 0; s < stages; ++s)
            for (int x = 0; x < 2; ++x) mbarrier_init(&bar_.full[x][s], 1), mbarrier_init(&bar_.empty[x][s], consumers);
    }

    /// Producer: the slot may be overwritten once the consumers released the tile the ring's depth
    /// before this one, in the phase before this tile's (nothing to wait for on the first pass).
    ROUNDSCOPE_DEVICE void acquire(KvOperand x, RingSlot slot, bool first_pass, SyncSite site = SyncSite::current()) {
        if (!first_pass) mbarrier_wait_parity(empty(x, slot), slot.parity ^ 1u, site);
    }
    /// Producer: the tile's `bytes` announced; returns the barrier its copies complete.
    ROUNDSCOPE_DEVICE std::uint64_t* commit(KvOperand x, RingSlot slot, std::uint32_t bytes,
                                            SyncSite site = SyncSite::current()) {
        mbarrier_arrive(full(x, slot), bytes, site);
        return full(x, slot);
    }
    /// Consumer: the tile in the slot has landed.
    ROUNDSCOPE_DEVICE void wait(KvOperand x, RingSlot slot, SyncSite site = SyncSite::current()) {
        mbarrier_wait_parity(full(x, slot), slot.parity, site);
    }
    /// Consumer: this thread's wgmmas have read the tile (after their wgmma.wait_group).
    ROUNDSCOPE_DEVICE void release(KvOperand x, RingSlot slot, SyncSite site = SyncSite::current()) {
        mbarrier_arrive(empty(x, slot), 0, site);
    }

private:
    ROUNDSCOPE_DEVICE std::uint64_t* full(KvOperand x, RingSlot slot) {
        return &bar_.full[static_cast<int>(x)][slot.stage];
    }
    ROUNDSCOPE_DEVICE std::uint64_t* empty(KvOperand x, RingSlot slot) {
        return &bar_.empty[static_cast<int>(x)][slot.stage];
    }
    KvBarriers& bar_;
};

}  // namespace roundscope::gpu::hopper
