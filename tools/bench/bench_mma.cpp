// Bit-exact emulated BF16 GEMM (the sm_90 mma.sync model, emu/mma/mma_gemm.hpp) against Eigen's
// float32 GEMM and a plain double-precision triple loop, in the same run, on one thread and on
// all. A score-matrix shape: Q [M, K] times K^T [K, N] with K = 128 (the head dimension).
// Rates are M*N*K multiply-adds per second; the scalar engine (mma_gemm_reference) is shown too.
//
//   bench_mma [--simd TARGET] [--quick]
#include <Eigen/Core>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "emu/mma/mma_gemm.hpp"
#include "emu/numbers/round.hpp"
#include "lib/parallel.hpp"
#include "tools/bench/best_rate.hpp"
#include "tools/bench/simd_option.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

double rate(const std::function<void()>& pass, double macs) { return bench::best_rate(pass, macs, 0.3); }

}  // namespace

int main(int argc, char** argv) {
    bench::apply_simd_option(argc, argv);
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const std::int64_t m = quick ? 256 : 1024, n = quick ? 256 : 1024, k = 128;
    const int all = resolve_threads(0);
    const MmaModel& model = *find_mma_model("sm90", "mma.sync", bf16, bf16, f32);

    // Gaussian BF16 inputs (scores of unit-variance Q and K), C = 0.
    std::mt19937_64 rng(1);
    std::normal_distribution<float> gauss;
    CastOptions rne;
    std::vector<std::uint32_t> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
    std::vector<std::uint32_t> c(static_cast<std::size_t>(m * n), 0), d(c.size());
    for (auto& x : a) x = static_cast<std::uint32_t>(cast_from_f32(gauss(rng), bf16, rne));
    for (auto& x : b) x = static_cast<std::uint32_t>(cast_from_f32(gauss(rng), bf16, rne));
    const GemmOperands g{a.data(), b.data(), c.data(), d.data(), 1, m, n, k};

    // The same values as float (Eigen) and double (the plain loop).
    Eigen::MatrixXf af(m, k), bf(k, n), cf(m, n);
    std::vector<double> ad(a.size()), bd(b.size()), cd(c.size());
    for (std::int64_t i = 0; i < m * k; ++i) ad[i] = af.data()[i] = static_cast<float>(decode(bf16, a[i]));
    for (std::int64_t i = 0; i < k * n; ++i) bd[i] = bf.data()[i] = static_cast<float>(decode(bf16, b[i]));
    auto plain_double = [&](int threads) {
        parallel_for(static_cast<std::size_t>(m), 8, threads, [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = begin; i < end; ++i) {
                double* out = cd.data() + i * n;
                for (std::int64_t j = 0; j < n; ++j) out[j] = 0;
                for (std::int64_t kk = 0; kk < k; ++kk) {
                    const double x = ad[i * k + kk];
                    const double* row = bd.data() + kk * n;
                    for (std::int64_t j = 0; j < n; ++j) out[j] += x * row[j];
                }
            }
        });
    };

    const double macs = static_cast<double>(m * n * k);
    std::printf("bench_mma: C = A * B, M = %lld, N = %lld, K = %lld, %d threads at most\n", static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k), all);
    std::printf("%-44s %10s %10s\n", "G multiply-adds per second", "1 thread", "all");
    struct Row {
        const char* name;
        std::function<void(int)> pass;
    };
    const Row rows[] = {
        {"emulated sm90 BF16 mma.sync (vector GEMM)", [&](int t) { mma_gemm(model, g, t); }},
        {"emulated sm90 BF16 mma.sync (scalar engine)", [&](int t) { mma_gemm_reference(model, g, t); }},
        {"Eigen float32 GEMM",
         [&](int t) {
             Eigen::setNbThreads(t);
             cf.noalias() = af * bf;
         }},
        {"plain double loop", plain_double},
    };
    double emulated[2] = {0, 0}, eigen[2] = {0, 0}, plain[2] = {0, 0};
    for (const Row& r : rows) {
        double per[2];
        for (int which = 0; which < 2; ++which) {
            const int threads = which == 0 ? 1 : all;
            per[which] = rate([&] { r.pass(threads); }, macs);
        }
        std::printf("%-44s %10.3f %10.3f\n", r.name, per[0], per[1]);
        if (r.name == rows[0].name) std::copy(per, per + 2, emulated);
        if (r.name == rows[2].name) std::copy(per, per + 2, eigen);
        if (r.name == rows[3].name) std::copy(per, per + 2, plain);
    }
    std::printf("emulated / Eigen float32: %.3f (1 thread) %.3f (all)\n", emulated[0] / eigen[0],
                emulated[1] / eigen[1]);
    std::printf("emulated / plain double:  %.3f (1 thread) %.3f (all)\n", emulated[0] / plain[0],
                emulated[1] / plain[1]);
    std::printf("4096 x 4096 x 128 score matrix, emulated on all threads: %.2f s\n",
                4096.0 * 4096.0 * 128.0 / (emulated[1] * 1e9));
    return 0;
}
