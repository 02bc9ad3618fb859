// The flash-attention emulator's speed: one head of BF16 inputs, N = 4096 (or --n N), D = 128,
// forward and forward + backward of a recipe (default fa2-bf16), against a baseline run in the
// same process: the same matrix products (2 forward, 5 more backward, each N^2 D multiply-adds)
// as plain float32 GEMMs in Eigen, i.e. what the arithmetic costs with nothing emulated.
//
//   bench_flash [--simd TARGET] [--n N] [--recipe NAME] [--threads T] [--causal]
#include <Eigen/Dense>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/numbers/round.hpp"
#include "tools/bench/best_rate.hpp"
#include "tools/bench/simd_option.hpp"

using namespace roundscope;

namespace {

double seconds_of(const std::function<void()>& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
    bench::apply_simd_option(argc, argv);
    std::uint64_t n = 4096;
    std::string recipe_name = "fa2-bf16";
    int threads = 0;
    bool causal = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--n") == 0 && i + 1 < argc)
            n = std::stoull(argv[++i]);
        else if (std::strcmp(argv[i], "--recipe") == 0 && i + 1 < argc)
            recipe_name = argv[++i];
        else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = std::stoi(argv[++i]);
        else if (std::strcmp(argv[i], "--causal") == 0)
            causal = true;
    }
    const std::uint64_t d = 128;
    const emu::AttentionRecipe recipe = emu::find_recipe(recipe_name);
    const emu::AttentionShape shape = emu::attention_shape(1, n, n, d, causal);
    const emu::AttentionOperands in = emu::random_operands(shape, *recipe.target.input, 1);

    emu::ForwardResult forward;
    const double t_forward = seconds_of([&] { forward = emu::flash_forward(recipe, shape, in, threads); });
    const double t_backward = seconds_of([&] { (void)emu::flash_backward(recipe, shape, in, forward, threads); });

    // Baseline: one N x N x D float32 GEMM in Eigen, scaled to the 2 (forward) and 7 (forward +
    // backward) products of the emulator.
    Eigen::MatrixXf a = Eigen::MatrixXf::Random(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(d));
    Eigen::MatrixXf b = Eigen::MatrixXf::Random(static_cast<Eigen::Index>(d), static_cast<Eigen::Index>(n));
    Eigen::MatrixXf c(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(n));
    const double macs = static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(d);
    const double eigen_rate = bench::best_rate([&] { c.noalias() = a * b; }, macs);  // G MAC/s
    const double fraction = causal ? 0.5 : 1.0;
    const double t_eigen_forward = 2 * fraction * macs / (eigen_rate * 1e9);
    const double t_eigen_total = 7 * fraction * macs / (eigen_rate * 1e9);

    std::printf("bench_flash: recipe %s, one head, N = %llu, D = %llu, %scausal, threads %d (0 = all)\n",
                recipe.name.c_str(), static_cast<unsigned long long>(n), static_cast<unsigned long long>(d),
                causal ? "" : "not ", threads);
    std::printf("%-28s %10s %14s %12s\n", "pass", "emulator", "Eigen f32 GEMMs", "emulator/Eigen");
    std::printf("%-28s %9.2fs %13.3fs %11.1fx\n", "forward", t_forward, t_eigen_forward, t_forward / t_eigen_forward);
    std::printf("%-28s %9.2fs %13.3fs %11.1fx\n", "forward + backward", t_forward + t_backward, t_eigen_total,
                (t_forward + t_backward) / t_eigen_total);
    std::printf("emulated products: %.2f G MAC/s (forward + backward)\n",
                7 * fraction * macs / (t_forward + t_backward) / 1e9);
    return 0;
}
