// The ground truth's speed: the fast path (analysis/truth/attention_truth_fast.cpp) on one
// head of BF16 inputs with D = 128 at N = 4096 (or --n N), against the MPFI reference path
// measured in the same run at a smaller N (default 128) and scaled by its N^2 D cost.
//
//   bench_truth [--simd TARGET] [--n N] [--reference-n M] [--backward]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "analysis/truth/attention_truth.hpp"
#include "emu/numbers/round.hpp"
#include "tools/bench/simd_option.hpp"

using namespace roundscope;
using namespace roundscope::analysis;

namespace {

emu::AttentionInputs head(std::uint64_t n, std::uint64_t d, bool backward) {
    std::mt19937_64 rng(1);
    std::normal_distribution<double> g;
    auto tensor = [&](const char* name) {
        Tensor t = Tensor::zeros(name, DType::bf16, {n, d});
        for (std::uint64_t i = 0; i < n * d; ++i)
            t.set_bits_at(i, emu::cast_from_f64(g(rng), emu::bf16, emu::CastOptions{}));
        return t;
    };
    emu::AttentionInputs in;
    in.q = tensor("q"), in.k = tensor("k"), in.v = tensor("v");
    if (backward) in.d_o = tensor("do");
    in.n_q = in.n_kv = n, in.d = in.d_v = d;
    return in;
}

double seconds(const emu::AttentionInputs& in, bool backward, bool reference) {
    TruthOptions o;
    o.backward = backward;
    const auto start = std::chrono::steady_clock::now();
    const AttentionTruth t = reference ? attention_truth_reference(in, o) : attention_truth(in, o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!reference)
        std::printf("fast path: %llu row(s) handed to the reference\n",
                    static_cast<unsigned long long>(t.reference_rows));
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    bench::apply_simd_option(argc, argv);
    std::uint64_t n = 4096, reference_n = 128;
    bool backward = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--n") == 0 && i + 1 < argc)
            n = std::stoull(argv[++i]);
        else if (std::strcmp(argv[i], "--reference-n") == 0 && i + 1 < argc)
            reference_n = std::stoull(argv[++i]);
        else if (std::strcmp(argv[i], "--backward") == 0)
            backward = true;
    }
    const std::uint64_t d = 128;
    const double fast = seconds(head(n, d, backward), backward, false);
    const double reference_small = seconds(head(reference_n, d, backward), backward, true);
    const double scale = std::pow(static_cast<double>(n) / static_cast<double>(reference_n), 2);
    std::printf("bench_truth: one head, BF16, D = %llu, %s, all threads\n", static_cast<unsigned long long>(d),
                backward ? "forward + backward" : "forward");
    std::printf("fast path, N = %llu:                  %8.2f s\n", static_cast<unsigned long long>(n), fast);
    std::printf("reference, N = %llu (measured):        %8.2f s\n", static_cast<unsigned long long>(reference_n),
                reference_small);
    std::printf("reference, N = %llu (x (N/%llu)^2):   %8.1f s\n", static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(reference_n), reference_small * scale);
    std::printf("fast / reference speed-up:           %8.1fx\n", reference_small * scale / fast);
    return 0;
}
