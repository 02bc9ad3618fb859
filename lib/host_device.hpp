#pragma once
// Marks functions that the CPU emulator and the CUDA kernels share. One source of numerics:
// every scalar rule in emu/ carries this so gpu/ calls the very same code.
#if defined(__CUDACC__)
#define ROUNDSCOPE_HD __host__ __device__
#else
#define ROUNDSCOPE_HD
#endif
