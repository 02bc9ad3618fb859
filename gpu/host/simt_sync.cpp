#include "gpu/host/simt_sync.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace roundscope::gpu::simt {
namespace {

std::atomic<long long> watchdog_ms{60000};

std::string where(std::source_location site) {
    const char* file = site.file_name();
    const char* gpu = std::strstr(file, "gpu/");  // the path from the repository's gpu/ or tests/ on
    const char* tests = std::strstr(file, "tests/");
    const char* from = tests != nullptr ? tests : gpu != nullptr ? gpu : file;
    return fmt::format("{}:{}", from, site.line());
}

// "threads 0-31, 64" for the sorted thread indices.
std::string ranges(const std::vector<unsigned>& t) {
    std::string out;
    for (std::size_t i = 0; i < t.size();) {
        std::size_t j = i;
        while (j + 1 < t.size() && t[j + 1] == t[j] + 1) ++j;
        out += (out.empty() ? "" : ", ") + (j == i ? std::to_string(t[i]) : fmt::format("{}-{}", t[i], t[j]));
        i = j + 1;
    }
    return out;
}

// The registers a thread is launched with when its kernel is compiled for one block of `threads`
// an SM (__launch_bounds__(threads, 1)): the 64 K register file split evenly, in the allocation's
// units of 8, at most 256.
unsigned launch_registers(unsigned threads) { return std::min(256u, 65536u / std::max(threads, 1u) / 8u * 8u); }

}  // namespace

void set_watchdog(std::chrono::milliseconds limit) { watchdog_ms = limit.count(); }
std::chrono::milliseconds watchdog() { return std::chrono::milliseconds(watchdog_ms.load()); }

BlockSync::BlockSync(unsigned threads)
    : sites_(threads),
      registers_(threads, launch_registers(threads)),
      waited_(threads),
      known_completed_(threads),
      unfenced_(threads) {}

std::string BlockSync::name(const void* bar) const {
    return fmt::format("mbarrier at shared +{}", static_cast<const char*>(bar) - static_cast<const char*>(shared_));
}

std::string BlockSync::failure() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
}

void BlockSync::fail(std::unique_lock<std::mutex>&, std::string why) {
    if (failure_.empty()) {
        // Every thread's state, grouped: where it waits, or running, or finished.
        std::map<std::string, std::vector<unsigned>> by_site;
        for (unsigned t = 0; t < sites_.size(); ++t) by_site[describe(sites_[t])].push_back(t);
        std::string report;
        for (const auto& [site, threads] : by_site) report += fmt::format("; threads {}: {}", ranges(threads), site);
        failure_ = why + report;
    }
    wake_all();
    throw BlockFailed{};
}

void BlockSync::wake_all() {
    moved_.notify_all();
    for (Named& b : named_) b.passed.notify_all();
}

std::string BlockSync::describe(const Site& s) const {
    switch (s.kind) {
        case Site::Kind::running:
            return "running";
        case Site::Kind::finished:
            return "finished";
        case Site::Kind::refused:
            return "refused";
        case Site::Kind::named_barrier:
            return fmt::format("bar.sync {} for {} threads ({})", s.id, s.count, where(s.where));
        case Site::Kind::mbarrier:
            return fmt::format("{}: wait for parity {} ({})", name(s.bar), s.id, where(s.where));
        case Site::Kind::registers:
            return fmt::format("setmaxnreg.inc to {} registers, {} free in the block ({})", s.id, free_registers_,
                               where(s.where));
    }
    return "?";
}

template <class Done>
void BlockSync::wait(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, unsigned thread, const Site& site,
                     Done done) {
    sites_[thread] = site;
    while (!done()) {
        if (!failure_.empty()) throw BlockFailed{};
        const std::uint64_t seen = progress_;
        if (!cv.wait_for(lock, watchdog(), [&] { return done() || progress_ != seen || !failure_.empty(); }))
            fail(lock, fmt::format("deadlock: no thread moved for {} ms", watchdog().count()));
    }
    sites_[thread] = Site{};
}

void BlockSync::named_barrier(unsigned thread, unsigned id, unsigned count, bool wait_for_it,
                              std::source_location site) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!failure_.empty()) throw BlockFailed{};
    if (id >= 16) fail(lock, fmt::format("named barrier {} at {}: ids are 0-15", id, where(site)));
    if (count == 0 || count % 32 != 0 || count > sites_.size())
        fail(lock, fmt::format("named barrier {} at {}: thread {} counts {} threads, not whole warps of the block's {}",
                               id, where(site), thread, count, sites_.size()));
    Named& b = named_[id];
    if (b.arrived == 0) b.expected = count;
    if (count != b.expected)
        fail(lock, fmt::format("named barrier {} at {}: thread {} counts {} threads, the phase began with {}", id,
                               where(site), thread, count, b.expected));
    const std::uint64_t generation = b.generation;
    ++progress_;
    if (++b.arrived == b.expected) {
        b.arrived = 0, ++b.generation;
        b.passed.notify_all();
        return;
    }
    if (wait_for_it)
        wait(lock, b.passed, thread, Site{Site::Kind::named_barrier, id, count, nullptr, site},
             [&] { return b.generation != generation; });
}

BlockSync::Mbarrier& BlockSync::mbarrier(std::unique_lock<std::mutex>& lock, const void* bar, unsigned thread,
                                         const char* use) {
    if (!failure_.empty()) throw BlockFailed{};
    const auto it = mbarriers_.find(bar);
    if (it == mbarriers_.end()) fail(lock, fmt::format("{}: thread {} uses it before its init", name(bar), thread));
    (void)use;
    return it->second;
}

void BlockSync::mbarrier_init(unsigned thread, const void* bar, unsigned count) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!failure_.empty()) throw BlockFailed{};
    Mbarrier m;
    m.count = m.pending = count, m.init_thread = thread;
    mbarriers_[bar] = m;
    ++progress_;
    moved_.notify_all();
}

void BlockSync::complete_if_done(Mbarrier& m) {
    if (m.pending == 0 && m.tx == 0) {
        m.pending = m.count, ++m.phase;
        m.released = std::move(m.releasing);
        m.releasing.clear();
        m.completed = std::move(m.completing);
        m.completing.clear();
        moved_.notify_all();
    }
}

std::uint64_t BlockSync::mbarrier_arrive(unsigned thread, const void* bar, std::uint32_t tx, std::source_location site,
                                         const std::vector<InFlightRead>& still_read, std::uint64_t completed_groups) {
    std::unique_lock<std::mutex> lock(mutex_);
    Mbarrier& m = mbarrier(lock, bar, thread, "arrive");
    if (m.pending == 0)
        fail(lock,
             fmt::format("{} at {}: thread {} arrives past its count of {}", name(bar), where(site), thread, m.count));
    const std::uint64_t phase = m.phase;
    for (const InFlightRead& r : still_read) m.releasing.push_back({r.span, thread, r.group, site, bar});
    std::uint64_t& completed = m.completing[thread];
    completed = std::max(completed, completed_groups);
    m.tx += tx;
    --m.pending;
    ++progress_;
    complete_if_done(m);  // wakes the waiters when the phase ends, not at every arrival: a
                          // warpgroup's 128 arrivals would wake every waiting thread 128 times
    return phase;
}

void BlockSync::mbarrier_complete_tx(unsigned thread, const void* bar, std::uint32_t bytes, std::source_location) {
    std::unique_lock<std::mutex> lock(mutex_);
    Mbarrier& m = mbarrier(lock, bar, thread, "complete_tx");
    m.tx -= bytes;
    ++progress_;
    complete_if_done(m);
}

void BlockSync::fence_mbarrier_init(unsigned thread) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [bar, m] : mbarriers_)
        if (m.init_thread == thread) m.copy_engine_sees_it = true;
}

void BlockSync::set_max_registers(unsigned thread, unsigned registers, bool increase, std::source_location site) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!failure_.empty()) throw BlockFailed{};
    const unsigned now = registers_[thread];
    if (increase ? registers < now : registers > now)
        fail(lock, fmt::format("setmaxnreg.{} {} at {}: thread {} holds {} registers", increase ? "inc" : "dec",
                               registers, where(site), thread, now));
    if (increase)
        wait(lock, moved_, thread, Site{Site::Kind::registers, registers, 0, nullptr, site},
             [&] { return free_registers_ >= registers - now; });
    free_registers_ = free_registers_ + now - registers;
    registers_[thread] = registers;
    ++progress_;
    moved_.notify_all();
}

void BlockSync::add_copy(const void* bar, std::uint32_t bytes, std::function<void()> land) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!failure_.empty()) throw BlockFailed{};
    const auto it = mbarriers_.find(bar);
    if (it == mbarriers_.end()) fail(lock, fmt::format("{}: a TMA copy completes on it before its init", name(bar)));
    if (!it->second.copy_engine_sees_it)
        fail(lock, fmt::format("{}: a TMA copy completes on it, but thread {} did not fence its init "
                               "(fence.mbarrier_init) for the copy engine",
                               name(bar), it->second.init_thread));
    copies_.emplace(bar, std::make_pair(bytes, std::move(land)));
    ++progress_;
    moved_.notify_all();
}

void BlockSync::land_copies(const void* bar, Mbarrier& m) {
    const auto [first, last] = copies_.equal_range(bar);
    if (first == last) return;
    for (auto it = first; it != last; ++it) {
        it->second.second();
        m.tx -= it->second.first;
    }
    copies_.erase(first, last);
    ++progress_;
    complete_if_done(m);
}

bool BlockSync::mbarrier_try_wait_parity(unsigned thread, const void* bar, unsigned parity, std::source_location) {
    std::unique_lock<std::mutex> lock(mutex_);
    Mbarrier& m = mbarrier(lock, bar, thread, "try_wait");
    land_copies(bar, m);
    const bool done = (m.phase & 1) != (parity & 1);
    if (done) note_waited(thread, bar, m);
    return done;
}

void BlockSync::note_waited(unsigned thread, const void*, const Mbarrier& m) {
    std::map<unsigned, std::uint64_t>& known = known_completed_[thread];
    for (const auto& [arriving, completed] : m.completed) known[arriving] = std::max(known[arriving], completed);
    std::vector<EarlyRelease>& open = waited_[thread];
    open.insert(open.end(), m.released.begin(), m.released.end());
    std::erase_if(open, [&](const EarlyRelease& r) {
        const auto it = known.find(r.thread);
        return it != known.end() && it->second > r.group;
    });
}

void BlockSync::check_shared_write(unsigned thread, SharedSpan span, const char* what) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (const EarlyRelease& r : waited_[thread])
        if (span.begin < r.span.end && r.span.begin < span.end)
            fail(lock, fmt::format("{} into shared +{}..+{} by thread {}: {} was released at {} by thread {} while "
                                   "its wgmma still read +{}..+{} (a wgmma reads shared memory until "
                                   "wgmma.wait_group; arrive after it)",
                                   what, span.begin, span.end, thread, name(r.bar), where(r.site), r.thread,
                                   r.span.begin, r.span.end));
}

void BlockSync::generic_shared_write(unsigned thread, SharedSpan span, std::source_location site) {
    const std::lock_guard<std::mutex> lock(mutex_);
    auto& open = unfenced_[thread];
    if (!open.empty() && open.back().first.end == span.begin)
        open.back().first.end = span.end;  // a run of adjacent writes: one span, its first site
    else
        open.emplace_back(span, site);
}

void BlockSync::fence_proxy_async(unsigned thread) {
    const std::lock_guard<std::mutex> lock(mutex_);
    unfenced_[thread].clear();
}

void BlockSync::check_async_read(unsigned thread, SharedSpan span, const char* what) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (unsigned writer = 0; writer < unfenced_.size(); ++writer)
        for (const auto& [w, site] : unfenced_[writer])
            if (span.begin < w.end && w.begin < span.end)
                fail(lock, fmt::format("{} by thread {} reads shared +{}..+{}, which thread {} wrote at {} "
                                       "(+{}..+{}) with no fence.proxy.async.shared::cta after it: the copy "
                                       "engine may read the bytes from before the write",
                                       what, thread, span.begin, span.end, writer, where(site), w.begin, w.end));
}

void BlockSync::mbarrier_wait_parity(unsigned thread, const void* bar, unsigned parity, std::source_location site) {
    std::unique_lock<std::mutex> lock(mutex_);
    Mbarrier& m = mbarrier(lock, bar, thread, "wait");
    wait(lock, moved_, thread, Site{Site::Kind::mbarrier, parity & 1, 0, bar, site}, [&] {
        land_copies(bar, m);  // the copies issued so far land now
        return (m.phase & 1) != (parity & 1);
    });
    note_waited(thread, bar, m);
}

void BlockSync::refuse(unsigned thread, const std::string& why) {
    std::unique_lock<std::mutex> lock(mutex_);
    sites_[thread].kind = Site::Kind::refused;
    try {
        fail(lock, why);
    } catch (const BlockFailed&) {
    }
}

void BlockSync::finished(unsigned thread) {
    const std::lock_guard<std::mutex> lock(mutex_);
    sites_[thread].kind = Site::Kind::finished;
    ++progress_;
    moved_.notify_all();
}

}  // namespace roundscope::gpu::simt
