#pragma once
// ROUNDSCOPE_FMA_CLONES marks a host function whose loop is made of fused multiply-adds. The
// build targets baseline x86-64, where std::fma is a call into libm (glibc runs its FMA3 version,
// but through a call per operation, and no loop around it vectorizes): SLEEF's expf model ran
// 4.8x slower for it (32 against 6.7 ns an element), the AMX GEMM model 10x. GCC and
// clang compile a marked function twice, once for CPUs with FMA3, where each fma is one
// instruction (and loops vectorize), and once for the rest, and the loader picks the clone the
// CPU runs. Both round each fma once, so the bits do not depend on the clone: only the time does.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && defined(__linux__)
#define ROUNDSCOPE_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define ROUNDSCOPE_FMA_CLONES
#endif
