#pragma once
// Deterministic data parallelism: [0, n) is cut into chunks whose boundaries depend only on n
// and the grain, never on the thread count, so results are the same on 1 or N threads.
#include <cstddef>
#include <functional>

namespace roundscope {

/// Worker threads to use for `requested` (0 = all hardware threads).
int resolve_threads(int requested);

/// Calls body(begin, end) for the chunks [k * grain, min(n, (k + 1) * grain)), on up to
/// `threads` threads of a persistent pool (0 = all). Returns when every chunk is done; the
/// first exception thrown by a chunk is rethrown here.
void parallel_for(std::size_t n, std::size_t grain, int threads,
                  const std::function<void(std::size_t, std::size_t)>& body);

}  // namespace roundscope
