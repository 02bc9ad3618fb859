#pragma once
// What every GPU test starts with: the device's compute capability, or the exit code 77 that
// CTest reports as "skipped" where no GPU is usable. On a machine that must have one
// (ROUNDSCOPE_REQUIRE_GPU=1, as the GPU machines' runs set), no usable GPU is a failure.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "gpu/probes/mma_probe.hpp"

namespace roundscope::test {

inline int compute_capability_or_skip() {
    const int cc = gpu::compute_capability();
    if (cc == 0) {
        const char* required = std::getenv("ROUNDSCOPE_REQUIRE_GPU");
        if (required != nullptr && std::string_view(required) == "1") {
            std::printf("no usable GPU, and ROUNDSCOPE_REQUIRE_GPU=1: failed\n");
            std::exit(1);
        }
        std::printf("no usable GPU: skipped\n");
        std::exit(77);
    }
    return cc;
}

/// The verdict of a GPU test: a test that ran no case proves nothing and fails.
inline int verdict(int cases, int failures, const char* what) {
    std::printf("%d %s run, %d failing\n", cases, what, failures);
    if (cases == 0) std::printf("no %s ran on this GPU: failed\n", what);
    return cases > 0 && failures == 0 ? 0 : 1;
}

}  // namespace roundscope::test
