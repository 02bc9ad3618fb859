#pragma once
// The timing loop every benchmark shares: best of 3 runs, each repeating `pass` for at least
// `min_seconds`, as `work` units per pass, in G units per second.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>

namespace roundscope::bench {

inline double best_rate(const std::function<void()>& pass, double work, double min_seconds = 0.2) {
    using Clock = std::chrono::steady_clock;
    double best = 0;
    for (int run = 0; run < 3; ++run) {
        const auto start = Clock::now();
        double seconds = 0;
        std::size_t reps = 0;
        do {
            pass();
            ++reps;
            seconds = std::chrono::duration<double>(Clock::now() - start).count();
        } while (seconds < min_seconds);
        best = std::max(best, work * static_cast<double>(reps) / seconds / 1e9);
    }
    return best;
}

}  // namespace roundscope::bench
