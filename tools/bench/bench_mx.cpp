// MX block quantize and dequantize throughput: the batch path of block_quantize against the
// block-by-block scalar reference (mx_quantize_block), in the same run, on one thread and on
// all. Input: float32 Gaussian values at per-row random scales, blocks of 32 along the last axis.
//
//   bench_mx [--quick]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>

#include "emu/block_quantize.hpp"
#include "lib/parallel.hpp"

using namespace roundscope;
using Clock = std::chrono::steady_clock;

namespace {

// Best of 3 timings of `pass`, in G elements per second.
double rate(const std::function<void()>& pass, double elements) {
    double best = 1e30;
    for (int run = 0; run < 3; ++run) {
        const auto start = Clock::now();
        pass();
        best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
    }
    return elements / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const std::uint64_t rows = quick ? 1 << 14 : 1 << 19, cols = 64;
    Tensor t = Tensor::zeros("x", DType::f32, {rows, cols});
    std::mt19937_64 rng(1);
    std::normal_distribution<float> gauss;
    for (std::uint64_t r = 0; r < rows; ++r) {
        const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
        for (std::uint64_t c = 0; c < cols; ++c) t.set_bits_at(r * cols + c, std::bit_cast<std::uint32_t>(gauss(rng) * scale));
    }
    const double n = static_cast<double>(t.size());
    const int all = resolve_threads(0);
    std::printf("%llu float32 elements, blocks of 32 along the last axis, scale rule floor, rne; %d threads available\n",
                static_cast<unsigned long long>(t.size()), all);
    std::printf("%-12s %-10s %8s %14s %14s %10s\n", "format", "operation", "threads", "batch G/s", "reference G/s", "speed-up");
    for (const emu::BlockFormat* f : {&emu::mxfp8_e4m3, &emu::mxfp4}) {
        emu::BlockSpec spec;
        spec.format = f;
        for (int threads : {1, all}) {
            spec.threads = threads;
            spec.scalar_reference = false;
            emu::BlockQuantized q;
            const double batch = rate([&] { q = emu::block_quantize(t, spec); }, n);
            spec.scalar_reference = true;
            const double reference = rate([&] { q = emu::block_quantize(t, spec); }, n);
            std::printf("%-12s %-10s %8d %14.3f %14.3f %9.1fx\n", std::string(f->name).c_str(), "quantize", threads, batch,
                        reference, batch / reference);
            spec.scalar_reference = false;
            const double dequant = rate([&] { (void)emu::block_dequantize(q, spec); }, n);
            std::printf("%-12s %-10s %8d %14.3f %14s %10s\n", std::string(f->name).c_str(), "dequantize", threads, dequant, "-", "-");
        }
    }
    return 0;
}
