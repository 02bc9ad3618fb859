#pragma once
// Every benchmark's `--simd TARGET`: the kernels run at that Highway target or below (AVX2 on an
// AVX-512 machine, SSE4, SCALAR), so one machine measures each target it has; the option is
// taken out of argv before the benchmark reads its own. Prints the target the run uses.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lib/error.hpp"
#include "lib/simd_target.hpp"

namespace roundscope::bench {

inline void apply_simd_option(int& argc, char** argv) {
    int kept = 1;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--simd") == 0 && i + 1 < argc) {
            try {
                limit_simd_target(argv[++i]);
            } catch (const Error& e) {
                std::fprintf(stderr, "bench: error: --simd: %s\n", e.what());
                std::exit(2);
            }
        } else {
            argv[kept++] = argv[i];
        }
    }
    argc = kept;
    std::string all;
    for (const std::string& t : simd_targets()) all += (all.empty() ? "" : ", ") + t;
    std::printf("SIMD target: %s (this CPU and build: %s)\n", simd_target().c_str(), all.c_str());
}

}  // namespace roundscope::bench
