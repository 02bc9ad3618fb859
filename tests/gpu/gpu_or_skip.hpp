#pragma once
// What every GPU test starts with: the device's compute capability, or the exit code 77 that
// CTest reports as "skipped" where no GPU is usable.
#include <cstdio>
#include <cstdlib>

#include "gpu/mma_probe.hpp"

namespace roundscope::test {

inline int compute_capability_or_skip() {
    const int cc = gpu::compute_capability();
    if (cc == 0) {
        std::printf("no usable GPU: skipped\n");
        std::exit(77);
    }
    return cc;
}

}  // namespace roundscope::test
