#include "lib/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace roundscope {
namespace {

// Set on a thread while it runs chunks, so that a parallel_for nested inside a chunk runs
// serially instead of waiting on the pool it is part of.
thread_local bool inside_parallel_region = false;

// A fixed set of workers that sleep until a job is posted. Keeping them alive makes
// parallel_for cheap enough for in-cache batches (no thread start per call).
class Pool {
public:
    static Pool& instance() {
        static Pool pool;
        return pool;
    }

    void run(std::size_t chunks, int threads, const std::function<void(std::size_t)>& chunk_body) {
        std::unique_lock<std::mutex> caller(run_mutex_);  // one job at a time
        std::exception_ptr error;
        std::mutex error_mutex;
        std::atomic<std::size_t> next{0};
        std::function<void()> work = [&] {
            inside_parallel_region = true;
            for (std::size_t c; (c = next.fetch_add(1)) < chunks;) {
                try {
                    chunk_body(c);
                } catch (...) {
                    std::lock_guard<std::mutex> lock(error_mutex);
                    if (!error) error = std::current_exception();
                }
            }
            inside_parallel_region = false;
        };
        const int helpers = std::min<int>(threads - 1, static_cast<int>(workers_.size()));
        {
            std::lock_guard<std::mutex> lock(mutex_);
            job_ = &work;
            active_ = helpers;
            wanted_ = helpers;
            ++generation_;
        }
        wake_.notify_all();
        work();
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return active_ == 0; });
        job_ = nullptr;
        if (error) std::rethrow_exception(error);
    }

private:
    Pool() {
        const int n = std::max(1u, std::thread::hardware_concurrency()) - 1;
        for (int i = 0; i < n; ++i) workers_.emplace_back([this] { loop(); });
    }
    ~Pool() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        for (auto& t : workers_) t.join();
    }

    void loop() {
        std::size_t seen = 0;
        for (;;) {
            std::function<void()>* job;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [&] { return stop_ || (generation_ != seen && wanted_ > 0); });
                if (stop_) return;
                seen = generation_;
                --wanted_;
                job = job_;
            }
            (*job)();
            std::lock_guard<std::mutex> lock(mutex_);
            if (--active_ == 0) done_.notify_all();
        }
    }

    std::vector<std::thread> workers_;
    std::mutex run_mutex_, mutex_;
    std::condition_variable wake_, done_;
    std::function<void()>* job_ = nullptr;
    std::size_t generation_ = 0;
    int active_ = 0, wanted_ = 0;
    bool stop_ = false;
};

}  // namespace

int resolve_threads(int requested) {
    // hardware_concurrency() asks the kernel each time; in-cache batches call this per batch.
    static const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return requested <= 0 ? hw : std::min(requested, hw);
}

void parallel_for(std::size_t n, std::size_t grain, int threads,
                  const std::function<void(std::size_t, std::size_t)>& body) {
    grain = std::max<std::size_t>(grain, 1);
    const std::size_t chunks = (n + grain - 1) / grain;
    const int t = std::min<std::size_t>(resolve_threads(threads), chunks);
    auto chunk_body = [&](std::size_t c) { body(c * grain, std::min(n, (c + 1) * grain)); };
    if (t <= 1 || inside_parallel_region) {
        for (std::size_t c = 0; c < chunks; ++c) chunk_body(c);
        return;
    }
    Pool::instance().run(chunks, t, chunk_body);
}

}  // namespace roundscope
