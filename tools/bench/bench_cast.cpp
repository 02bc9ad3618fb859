// Batch-cast throughput: roundscope's SIMD batch casts against a loop over the CUDA headers'
// host conversions, against MPFR, and against a plain copy of the same bytes (the memory
// bandwidth limit), measured in the same run. Prints G elements/s and ratios.
//
//   bench_cast [--simd TARGET] [--quick]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <mpfr.h>

#include "emu/batch/batch_cast.hpp"
#include "lib/parallel.hpp"
#include "tools/bench/best_rate.hpp"
#include "tools/bench/simd_option.hpp"

#if ROUNDSCOPE_BENCH_CUDA_HEADERS
#include <cuda_bf16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#endif

using namespace roundscope;

namespace {

double rate(const std::function<void()>& pass, std::size_t elements, double min_seconds) {
    return bench::best_rate(pass, static_cast<double>(elements), min_seconds);
}

// Runs `per_thread(t)` on `threads` threads at once (each on its own data) and returns the
// summed rate: how the in-cache multi-thread figures are measured.
double rate_threads(int threads, const std::function<void(int)>& per_thread, std::size_t elements, double min_seconds) {
    if (threads == 1) return rate([&] { per_thread(0); }, elements, min_seconds);
    return rate(
        [&] {
            std::vector<std::thread> pool;
            for (int t = 0; t < threads; ++t)
                pool.emplace_back([&, t] {
                    for (int r = 0; r < 64; ++r) per_thread(t);
                });
            for (auto& th : pool) th.join();
        },
        elements * threads * 64, min_seconds);
}

std::vector<float> test_values(std::size_t n) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = normal(rng);
    return v;
}

struct Target {
    const char* name;
    const emu::Format* format;
};

}  // namespace

int main(int argc, char** argv) {
    bench::apply_simd_option(argc, argv);
    const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
    const double min_seconds = quick ? 0.05 : 0.3;
    const int all_threads = resolve_threads(0);
    const std::size_t in_cache = std::size_t{1} << 16;
    const std::size_t streaming = quick ? std::size_t{1} << 22 : std::size_t{1} << 26;
    const Target targets[] = {{"bf16", &emu::bf16}, {"e4m3", &emu::e4m3}, {"e2m1", &emu::e2m1}};

    std::printf("roundscope batch-cast throughput (G elements/s); %d hardware threads\n", all_threads);
    std::printf("%-6s %-4s %-9s %-7s %10s %10s %10s %10s %12s %12s\n", "to", "mode", "data", "threads", "roundscope",
                "cuda_hdr", "mpfr", "copy", "x cuda_hdr", "of copy");
    for (const Target& t : targets) {
        for (const char* mode : {"rne", "sr"}) {
            emu::CastOptions o = emu::convention_options(emu::Convention::cuda, *t.format);
            emu::parse_rounding_mode(mode, o);
            for (const bool cached : {true, false}) {
                for (const int threads : {1, all_threads}) {
                    const std::size_t n = cached ? in_cache : streaming;
                    // One input and output array per thread in cache; one shared array streaming.
                    const int arrays = cached ? threads : 1;
                    std::vector<std::vector<float>> in(arrays, test_values(n));
                    std::vector<std::vector<std::uint16_t>> out(arrays, std::vector<std::uint16_t>(n));
                    std::vector<std::vector<std::uint8_t>> out8(arrays, std::vector<std::uint8_t>(n));
                    std::vector<std::vector<float>> copy_out(arrays, std::vector<float>(n));
                    auto ours = [&](int a, int thread_count) {
                        const std::span<const float> src(in[a]);
                        if (t.format->bits > 8)
                            emu::cast_batch(src, *t.format, o, std::span<std::uint16_t>(out[a]), {0, thread_count});
                        else
                            emu::cast_batch(src, *t.format, o, std::span<std::uint8_t>(out8[a]), {0, thread_count});
                    };
                    auto copy = [&](int a) { std::memcpy(copy_out[a].data(), in[a].data(), n * sizeof(float)); };
                    double r_ours, r_copy;
                    if (cached) {
                        r_ours = rate_threads(
                            threads, [&](int a) { ours(a, 1); }, n, min_seconds);
                        r_copy = rate_threads(threads, copy, n, min_seconds);
                    } else {
                        r_ours = rate([&] { ours(0, threads); }, n, min_seconds);
                        r_copy = threads == 1
                                     ? rate([&] { copy(0); }, n, min_seconds)
                                     : rate(
                                           [&] {
                                               parallel_for(n, 1 << 16, threads, [&](std::size_t b, std::size_t e) {
                                                   std::memcpy(copy_out[0].data() + b, in[0].data() + b,
                                                               (e - b) * sizeof(float));
                                               });
                                           },
                                           n, min_seconds);
                    }
                    double r_cuda = NAN;
#if ROUNDSCOPE_BENCH_CUDA_HEADERS
                    if (std::string(mode) == "rne") {
                        auto cuda_loop = [&](int a) {
                            const float* src = in[a].data();
                            if (t.format == &emu::bf16) {
                                for (std::size_t i = 0; i < n; ++i)
                                    out[a][i] = static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(src[i])).x;
                            } else if (t.format == &emu::e4m3) {
                                for (std::size_t i = 0; i < n; ++i)
                                    out8[a][i] = __nv_cvt_float_to_fp8(src[i], __NV_SATFINITE, __NV_E4M3);
                            } else {
                                for (std::size_t i = 0; i < n; ++i)
                                    out8[a][i] = __nv_cvt_float_to_fp4(src[i], __NV_E2M1, cudaRoundNearest);
                            }
                        };
                        r_cuda = cached ? rate_threads(threads, cuda_loop, n, min_seconds)
                                        : (threads == 1 ? rate([&] { cuda_loop(0); }, n, min_seconds)
                                                        : std::numeric_limits<double>::quiet_NaN());
                    }
#endif
                    double r_mpfr = NAN;
                    if (std::string(mode) == "rne" && threads == 1 && cached) {
                        // MPFR: set at the target precision, then subnormalize (the oracle's way).
                        const std::size_t m = 1 << 14;
                        r_mpfr = rate(
                            [&] {
                                mpfr_t y;
                                mpfr_init2(y, t.format->man_bits + 1);
                                for (std::size_t i = 0; i < m; ++i) {
                                    const int tern = mpfr_set_flt(y, in[0][i], MPFR_RNDN);
                                    mpfr_subnormalize(y, tern, MPFR_RNDN);
                                }
                                mpfr_clear(y);
                            },
                            m, min_seconds);
                    }
                    std::printf("%-6s %-4s %-9s %-7d %10.3f %10.3f %10.4f %10.3f %12.1f %11.0f%%\n", t.name, mode,
                                cached ? "in-cache" : "streaming", threads, r_ours, r_cuda, r_mpfr, r_copy,
                                r_ours / r_cuda, 100 * r_ours / r_copy);
                }
            }
        }
    }
    return 0;
}
