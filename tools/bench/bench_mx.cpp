// MX block quantize and dequantize throughput: the batch path of block_quantize against the
// block-by-block scalar reference (mx_quantize_block), in the same run, on one thread and on
// all, in cache (2^17 elements, 512 KB, quantized over and over) and streaming (2^25, 128 MB).
// Input: float32 Gaussian values at per-row random scales, blocks of 32 along the last axis.
//
//   bench_mx [--simd TARGET] [--quick]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>

#include "emu/block/block_quantize.hpp"
#include "lib/parallel.hpp"
#include "tools/bench/best_rate.hpp"
#include "tools/bench/simd_option.hpp"

using namespace roundscope;

namespace {

double rate(const std::function<void()>& pass, double elements) { return bench::best_rate(pass, elements); }

Tensor gaussian_rows(std::uint64_t rows, std::uint64_t cols) {
    Tensor t = Tensor::zeros("x", DType::f32, {rows, cols});
    std::mt19937_64 rng(1);
    std::normal_distribution<float> gauss;
    for (std::uint64_t r = 0; r < rows; ++r) {
        const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
        for (std::uint64_t c = 0; c < cols; ++c)
            t.set_bits_at(r * cols + c, std::bit_cast<std::uint32_t>(gauss(rng) * scale));
    }
    return t;
}

}  // namespace

int main(int argc, char** argv) {
    bench::apply_simd_option(argc, argv);
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const int all = resolve_threads(0);
    std::printf("blocks of 32 along the last axis of float32 data, scale rule floor, rne; %d threads available\n", all);
    std::printf("%-10s %-12s %-10s %8s %14s %14s %10s\n", "data", "format", "operation", "threads", "batch G/s",
                "reference G/s", "speed-up");
    const std::uint64_t cols = 64;
    for (const auto& [data, rows] :
         {std::pair{"in-cache", std::uint64_t{1} << 11}, {"streaming", quick ? 1 << 14 : 1 << 19}}) {
        const Tensor t = gaussian_rows(rows, cols);
        const double n = static_cast<double>(t.size());
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
                std::printf("%-10s %-12s %-10s %8d %14.3f %14.3f %9.1fx\n", data, std::string(f->name).c_str(),
                            "quantize", threads, batch, reference, batch / reference);
                spec.scalar_reference = false;
                const double dequant = rate([&] { (void)emu::block_dequantize(q, spec); }, n);
                std::printf("%-10s %-12s %-10s %8d %14.3f %14s %10s\n", data, std::string(f->name).c_str(),
                            "dequantize", threads, dequant, "-", "-");
            }
        }
    }
    return 0;
}
