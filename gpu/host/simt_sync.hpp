#pragma once
// The simulated GPU's block-level synchronisation (gpu/primitives/sync.hpp's host side): named barriers
// (bar.sync / bar.arrive with an id and a thread count; __syncthreads is barrier 0 with the
// whole block) and shared-memory mbarriers (init, arrive, expect_tx, complete_tx,
// try_wait.parity). Every wait has a watchdog: when no thread of the block has moved for the
// watchdog's time, the block fails with a report of where each of its threads waits, and
// run_grid throws it as an Error. A protocol error (a barrier's count changed within a phase, a
// count that is not whole warps, an mbarrier used before its init, more arrivals than its count)
// fails the block the same way, at once. So does a buffer released too early: an arrival made
// while the thread's wgmmas still read shared memory (they read it until wgmma.wait_group) marks
// those spans on the phase, and a thread that waited for that phase and then loads into them by
// TMA fails the block, whatever the host threads' timing.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <source_location>
#include <string>
#include <vector>

namespace roundscope::gpu::simt {

/// Thrown in a simulated thread whose block has failed; run_grid turns it into an Error.
struct BlockFailed {};

/// Bytes [begin, end) of the block's shared memory.
struct SharedSpan {
    std::uint32_t begin = 0, end = 0;
};

/// Shared memory one of a thread's wgmmas in flight reads, and the wgmma's group: the thread's
/// groups numbered from 0 in the order it commits them (group g has completed once the thread's
/// wait_group calls have completed more than g groups).
struct InFlightRead {
    SharedSpan span;
    std::uint64_t group = 0;
};

/// How long the block's threads may all stand still before the watchdog fails it (default 60 s).
void set_watchdog(std::chrono::milliseconds limit);
std::chrono::milliseconds watchdog();

/// The synchronisation state of one block, guarded by one mutex.
class BlockSync {
public:
    explicit BlockSync(unsigned threads);
    /// The block's shared memory, where mbarriers are named by their offset.
    void set_shared(const void* shared) { shared_ = shared; }

    /// bar.arrive (wait false) or bar.sync (wait true) on barrier `id` (0-15) for `count` threads.
    void named_barrier(unsigned thread, unsigned id, unsigned count, bool wait, std::source_location site);

    void mbarrier_init(unsigned thread, const void* bar, unsigned count);
    /// fence.mbarrier_init by `thread`: the mbarriers it initialised become visible to the copy
    /// engine, which may then complete copies on them (add_copy fails the block before that).
    void fence_mbarrier_init(unsigned thread);
    /// Arrival (after adding `tx` bytes to the phase's expected transactions); the phase's number.
    /// still_read: the shared memory the thread's wgmmas in flight read (released with the phase);
    /// completed_groups: how many of its wgmma groups have completed (what a waiter learns).
    std::uint64_t mbarrier_arrive(unsigned thread, const void* bar, std::uint32_t tx, std::source_location site,
                                  const std::vector<InFlightRead>& still_read = {}, std::uint64_t completed_groups = 0);
    /// Transactions done (by the copy engine or complete_tx).
    void mbarrier_complete_tx(unsigned thread, const void* bar, std::uint32_t bytes, std::source_location site);
    bool mbarrier_try_wait_parity(unsigned thread, const void* bar, unsigned parity, std::source_location site);
    void mbarrier_wait_parity(unsigned thread, const void* bar, unsigned parity, std::source_location site);

    /// A copy engine's copy of `bytes` that completes them on mbarrier `bar` when it lands;
    /// it lands when a thread waits on (or tests) that mbarrier.
    void add_copy(const void* bar, std::uint32_t bytes, std::function<void()> land);

    /// A copy engine's write into `span` for `thread` (a TMA load it issued): the block fails if
    /// a phase the thread waited for was ended by an arrival whose wgmmas still read that memory,
    /// unless a later phase it waited for holds an arrival of the same thread made after that
    /// wgmma completed (a barrier whose arrivals come after wgmma.wait_group then orders the write).
    void check_shared_write(unsigned thread, SharedSpan span, const char* what);

    /// A generic-proxy write of `span` by `thread` (st.shared, gpu::store_shared_u32): the copy
    /// engine (the async proxy) may not see it until the thread's fence.proxy.async.shared::cta.
    void generic_shared_write(unsigned thread, SharedSpan span, std::source_location site);
    /// fence.proxy.async.shared::cta by `thread`: its generic writes so far are the engine's to read.
    void fence_proxy_async(unsigned thread);
    /// The copy engine reading `span` for `thread` (a TMA store's source): the block fails if any
    /// thread wrote into it by the generic proxy without fencing since.
    void check_async_read(unsigned thread, SharedSpan span, const char* what);

    /// setmaxnreg: the thread's registers set to `registers`. A decrease returns the difference to
    /// the block's pool (the registers it was launched with: 64 K split evenly, a multiple of 8 a
    /// thread, at most 256); an increase waits until the pool holds what it takes, so that a split
    /// that does not balance deadlocks here as on the GPU. An increase below the thread's count, or a
    /// decrease above it, fails the block.
    void set_max_registers(unsigned thread, unsigned registers, bool increase, std::source_location site);

    /// The simulated hardware refused what a thread asked (an Error in its kernel code): the
    /// block fails with `why`.
    void refuse(unsigned thread, const std::string& why);

    /// The calling thread is done with the kernel (a deadlock report names it finished).
    void finished(unsigned thread);
    /// The failure report, empty if the block did not fail.
    std::string failure() const;

private:
    struct Named {
        unsigned expected = 0, arrived = 0;
        std::uint64_t generation = 0;
        std::condition_variable passed;  // its waiters only: a barrier does not wake the others
    };
    // Where a thread is, described only when a report needs it (a wait is frequent, a report rare).
    struct Site {
        enum class Kind : std::uint8_t {
            running,
            named_barrier,
            mbarrier,
            registers,
            finished,
            refused
        } kind = Kind::running;
        unsigned id = 0, count = 0;
        const void* bar = nullptr;
        std::source_location where;
    };
    std::string describe(const Site& s) const;
    // An arrival on `bar` made while the arriving thread's wgmmas (of group `group`) still read `span`.
    struct EarlyRelease {
        SharedSpan span;
        unsigned thread = 0;
        std::uint64_t group = 0;
        std::source_location site;
        const void* bar = nullptr;
    };
    struct Mbarrier {
        unsigned count = 0, pending = 0;
        std::int64_t tx = 0;
        std::uint64_t phase = 0;
        unsigned init_thread = 0;
        bool copy_engine_sees_it = false;               // fence.mbarrier_init since its init
        std::vector<EarlyRelease> releasing, released;  // this phase's, the last ended phase's
        // each arriving thread's completed wgmma groups at its arrival: this phase's, the last ended
        std::map<unsigned, std::uint64_t> completing, completed;
    };
    void note_waited(unsigned thread, const void* bar, const Mbarrier& m);
    void fail(std::unique_lock<std::mutex>& lock, std::string why);
    // Waits on `cv` until done() holds, with the watchdog, the thread standing at `site`.
    template <class Done>
    void wait(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, unsigned thread, const Site& site,
              Done done);
    void wake_all();
    Mbarrier& mbarrier(std::unique_lock<std::mutex>& lock, const void* bar, unsigned thread, const char* use);
    void complete_if_done(Mbarrier& m);
    void land_copies(const void* bar, Mbarrier& m);
    std::string name(const void* bar) const;

    mutable std::mutex mutex_;
    std::condition_variable moved_;
    std::uint64_t progress_ = 0;  // counts every arrival, completion and finish
    Named named_[16];
    std::map<const void*, Mbarrier> mbarriers_;
    std::multimap<const void*, std::pair<std::uint32_t, std::function<void()>>> copies_;  // not landed
    const void* shared_ = nullptr;
    std::vector<Site> sites_;
    std::vector<unsigned> registers_;  // each thread's setmaxnreg count
    std::uint64_t free_registers_ = 0;
    // What each thread has learned from the phases it waited for: early releases not yet known to
    // be over, and each arriving thread's completed wgmma groups.
    std::vector<std::vector<EarlyRelease>> waited_;
    std::vector<std::map<unsigned, std::uint64_t>> known_completed_;
    // Each thread's generic shared writes since its last fence.proxy.async, and where they were made.
    std::vector<std::vector<std::pair<SharedSpan, std::source_location>>> unfenced_;
    std::string failure_;
};

}  // namespace roundscope::gpu::simt
